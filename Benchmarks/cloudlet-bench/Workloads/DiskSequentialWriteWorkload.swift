import CloudletCore

/// `disk-seqwrite`: sequential 1 MiB writes to a fresh file, one `fdatasync` at the end; MB/s (10^6 bytes)
/// including that sync. The ceiling for bulk loads, compaction and checkpoints.
final class DiskSequentialWriteWorkload: Workload {
    let name = "disk-seqwrite"
    let engine = "disk"
    let role = EngineRole.anchor
    let unit = "MB/s"
    let latencyOf = "one 1 MiB pwrite (buffered; the one fdatasync is in the throughput only)"

    static let chunkSize = 1 << 20
    let totalBytes: Int
    private var file: PosixFile?
    private let chunk: [UInt8]

    init(mebibytes: Int) {
        totalBytes = mebibytes << 20
        var rng = SplitMix64(state: 1 << 20)
        chunk = (0..<Self.chunkSize).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        file = try PosixFile(creating: dir + "/seqwrite.dat")
    }

    func run() throws -> RunMeasurement {
        guard let file = file.take() else { preconditionFailure("run() without setUp()") }
        let writes = totalBytes / Self.chunkSize
        var latencies: [Double] = []
        latencies.reserveCapacity(writes)
        let clock = Stopwatch()
        try chunk.withUnsafeBytes { bytes in
            for i in 0..<writes {
                let t = Stopwatch()
                try file.write(bytes, at: i * Self.chunkSize)
                latencies.append(t.elapsed)
            }
        }
        try file.dataSync()
        return RunMeasurement(operations: Double(totalBytes) / 1e6, seconds: clock.elapsed, latencies: latencies)
    }

    func tearDown() throws { file = nil }
}
