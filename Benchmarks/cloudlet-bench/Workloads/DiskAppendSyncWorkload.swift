/// `disk-append-sync`: 4 KiB appends to a fresh file, each followed by `fdatasync`. The ceiling for any engine
/// that makes every commit durable on its own: per-commit durability costs at least one of these.
///
/// The same measurement also runs as the `disk` row of `fillsync` and `fillsync-concurrent` (one append per
/// record, reported in records/s), interleaved with the engines' runs, so that their fraction of the limit
/// compares numbers taken at the same time on this noisy machine.
final class DiskAppendSyncWorkload: Workload {
    let name: String
    let engine = "disk"
    let role = EngineRole.anchor
    let unit: String
    let latencyOf = "one 4 KiB pwrite + fdatasync"
    /// True for the `disk` row of a `fillsync*` group: the limit itself.
    let comparesToSyncLimit: Bool
    /// The `disk` row of a `fillsync*` group stays in when `--filter` picks an engine of that group.
    var accompaniesGroup: Bool { comparesToSyncLimit }

    static let blockSize = 4096
    let appends: Int
    private var file: PosixFile?
    private let block: [UInt8]

    /// The stand-alone workload (`syncs/s`), or, with `limitOf`, the `disk` row of that workload (`records/s`).
    init(appends: Int, limitOf workload: String? = nil) {
        name = workload ?? "disk-append-sync"
        unit = workload == nil ? "syncs/s" : "records/s"
        comparesToSyncLimit = workload != nil
        self.appends = appends
        var rng = SplitMix64(state: 4096)
        block = (0..<Self.blockSize).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        file = try PosixFile(creating: dir + "/append.dat")
    }

    func run() throws -> RunMeasurement {
        guard let file = file.take() else { preconditionFailure("run() without setUp()") }
        var latencies: [Double] = []
        latencies.reserveCapacity(appends)
        let clock = Stopwatch()
        try block.withUnsafeBytes { bytes in
            for i in 0..<appends {
                let t = Stopwatch()
                try file.write(bytes, at: i * Self.blockSize)
                try file.dataSync()
                latencies.append(t.elapsed)
            }
        }
        return RunMeasurement(operations: Double(appends), seconds: clock.elapsed, latencies: latencies)
    }

    func tearDown() throws { file = nil }
}
