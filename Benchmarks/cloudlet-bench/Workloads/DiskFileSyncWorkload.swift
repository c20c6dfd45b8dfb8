#if canImport(Glibc)
import Glibc
#endif
import CloudletCore

/// `disk-filesync-1m`: what a 1 MB asset upload must do at the least to be durable when answered — create a new
/// file, write 1 MB, `fdatasync` it, rename it into a directory — once per file; MB/s (10^6 bytes). The upload
/// rows' per-file anchor: `disk-seqwrite` syncs once for the whole run, which no upload answered durably can.
final class DiskFileSyncWorkload: Workload {
    let name = "disk-filesync-1m"
    let engine = "disk"
    let role = EngineRole.anchor
    let unit = "MB/s"
    let latencyOf = "one 1 MB file created, written, fdatasync'd and renamed"

    static let size = 1_000_000
    let count: Int
    private var dir: String?
    private let bytes: [UInt8]

    init(count: Int) {
        self.count = count
        var rng = SplitMix64(state: 3 << 20)
        bytes = (0..<Self.size).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        for sub in ["/tmp", "/named"] where mkdir(dir + sub, 0o755) != 0 { throw BenchError.io("mkdir", dir + sub) }
        self.dir = dir
    }

    func run() throws -> RunMeasurement {
        guard let dir = dir.take() else { preconditionFailure("run() without setUp()") }
        var latencies: [Double] = []
        let clock = Stopwatch()
        for i in 0..<count {
            let t = Stopwatch()
            let temp = "\(dir)/tmp/\(i)"
            do {
                let file = try PosixFile(creating: temp)
                try bytes.withUnsafeBytes { try file.write($0, at: 0) }
                try file.dataSync()
            }
            guard rename(temp, "\(dir)/named/\(i)") == 0 else { throw BenchError.io("rename", temp) }
            latencies.append(t.elapsed)
        }
        return RunMeasurement(operations: Double(Self.size * count) / 1e6, seconds: clock.elapsed, latencies: latencies)
    }

    func tearDown() throws { dir = nil }
}
