import Foundation

await CLI.main(Array(CommandLine.arguments.dropFirst()))
