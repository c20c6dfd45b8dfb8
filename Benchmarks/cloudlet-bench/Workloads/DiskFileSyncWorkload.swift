#if canImport(Glibc)
import Glibc
#endif
import CloudletCore

/// The 1 MB asset rows' per-file anchors; MB/s (10^6 bytes):
/// - `disk-filesync-1m`: what a 1 MB asset upload must do at the least to be durable when answered — create a new
///   file, write 1 MB, `fdatasync` it, rename it into a directory — once per file. `disk-seqwrite` syncs once for
///   the whole run, which no upload answered durably can.
/// - `disk-fileread-1m`: what a 1 MB asset download must do at the least — open a file whose pages are not cached
///   (dropped with `POSIX_FADV_DONTNEED`, as the download rows drop theirs), read its 1 MB, close it — once per
///   file. `disk-seqread` streams one large file, whose readahead hides the disk's latency; a cold 1 MB file pays it
///   once per file.
final class DiskFileSyncWorkload: Workload {
    enum Direction { case write, read }

    let direction: Direction
    var name: String { direction == .write ? "disk-filesync-1m" : "disk-fileread-1m" }
    let engine = "disk"
    let role = EngineRole.anchor
    /// Runs in its asset row's group, interleaved with it (WorkloadCatalog.Definition.joins).
    var accompaniesGroup: Bool { true }
    let unit = "MB/s"
    var latencyOf: String {
        direction == .write
            ? "one 1 MB file created, written, fdatasync'd and renamed"
            : "one uncached 1 MB file opened, read whole and closed"
    }

    static let size = 1_000_000
    let count: Int
    private var dir: String?
    private let bytes: [UInt8]

    init(_ direction: Direction = .write, count: Int) {
        self.direction = direction
        self.count = count
        var rng = SplitMix64(state: 3 << 20)
        bytes = (0..<Self.size).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        for sub in ["/tmp", "/named"] where mkdir(dir + sub, 0o755) != 0 { throw BenchError.io("mkdir", dir + sub) }
        self.dir = dir
        guard direction == .read else { return }
        for i in 0..<count { try writeFile(i, in: dir) }
    }

    /// Creates, writes, syncs and renames file `i` (`named/<i>`).
    private func writeFile(_ i: Int, in dir: String) throws {
        let temp = "\(dir)/tmp/\(i)"
        do {
            let file = try PosixFile(creating: temp)
            try bytes.withUnsafeBytes { try file.write($0, at: 0) }
            try file.dataSync()
        }
        guard rename(temp, "\(dir)/named/\(i)") == 0 else { throw BenchError.io("rename", temp) }
    }

    func run() throws -> RunMeasurement {
        guard let dir = dir.take() else { preconditionFailure("run() without setUp()") }
        var latencies: [Double] = []
        var note: String?
        if direction == .read {
            for i in 0..<count where !(try PosixFile(readingFrom: "\(dir)/named/\(i)").dropCachedPages()) {
                note = "disk-fileread-1m: posix_fadvise(DONTNEED) failed, so the reads may come from the page cache"
            }
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        let clock = Stopwatch()
        for i in 0..<count {
            let t = Stopwatch()
            switch direction {
            case .write: try writeFile(i, in: dir)
            case .read:
                let file = try PosixFile(readingFrom: "\(dir)/named/\(i)")
                guard try file.read(into: buffer, at: 0) == Self.size else { throw BenchError.io("short read", file.path) }
            }
            latencies.append(t.elapsed)
        }
        return RunMeasurement(
            operations: Double(Self.size * count) / 1e6, seconds: clock.elapsed, latencies: latencies, note: note)
    }

    func tearDown() throws { dir = nil }
}
