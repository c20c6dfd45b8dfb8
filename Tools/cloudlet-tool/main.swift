// cloudlet-tool: offline inspection, verification and maintenance of a Cloudlet data directory.
// Subcommands and conventions: CLI.swift; README.md, "cloudlet-tool".
await ToolCLI.main(Array(CommandLine.arguments.dropFirst()))
