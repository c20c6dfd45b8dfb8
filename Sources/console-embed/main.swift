// console-embed OUTPUT.swift FILE…: writes a Swift source declaring `ConsoleFiles.contents`, each file's bytes by
// its name, for the ConsoleEmbed build-tool plugin (Plugins/ConsoleEmbed). The bytes are written as base64 string
// literals, which the compiler takes in at once (a large array literal of integers takes it minutes).
import Foundation

let arguments = CommandLine.arguments.dropFirst()
guard let output = arguments.first else {
    FileHandle.standardError.write(Data("usage: console-embed OUTPUT.swift FILE…\n".utf8))
    exit(64)
}
var source = """
    // Generated at build time by console-embed (Plugins/ConsoleEmbed) from Sources/CloudletServer/Console/Web.
    import CloudletCore

    /// The console's web files, embedded in the binary: name → bytes.
    enum ConsoleFiles {
        static let contents: [String: [UInt8]] = [

    """
for path in arguments.dropFirst() {
    let url = URL(fileURLWithPath: path)
    guard let data = FileManager.default.contents(atPath: path) else {
        FileHandle.standardError.write(Data("error: cannot read \(path)\n".utf8))
        exit(74)
    }
    source += "        \"\(url.lastPathComponent)\": Base64.decode(\"\(data.base64EncodedString())\")!,\n"
}
source += "    ]\n}\n"
do { try source.write(toFile: output, atomically: true, encoding: .utf8) } catch {
    FileHandle.standardError.write(Data("error: cannot write \(output): \(error)\n".utf8))
    exit(74)
}
