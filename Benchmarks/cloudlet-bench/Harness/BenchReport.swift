/// What `--json` prints: the results with the build, the machine and the engines' configurations.
struct BenchReport: Encodable {
    var buildConfiguration: String
    /// True for a debug build: every number below is meaningless.
    var debugBuild: Bool
    var quick: Bool
    var measuredRuns: Int
    var machine: MachineInfo
    /// Engine name → version and configuration.
    var engines: [String: String]
    var results: [BenchResult]
}
