/// `disk-append-sync`: 4 KiB appends to a fresh file, each followed by `fdatasync`. The ceiling for any engine
/// that makes every commit durable on its own: per-commit durability costs at least one of these.
final class DiskAppendSyncWorkload: Workload {
    let name = "disk-append-sync"
    let engine = "disk"
    let role = EngineRole.anchor
    let unit = "syncs/s"
    let latencyOf = "one 4 KiB pwrite + fdatasync"

    static let blockSize = 4096
    let appends: Int
    private var file: PosixFile?
    private let block: [UInt8]

    init(appends: Int) {
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
