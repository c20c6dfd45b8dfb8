import CloudletCore
import Foundation

/// The disk's sequential speed in 1 MiB pieces, MB/s (10^6 bytes):
/// - `disk-seqwrite`: writes to a fresh file, one `fdatasync` at the end, included in the time. The ceiling for bulk
///   loads, compaction and checkpoints, and the asset uploads' anchor.
/// - `disk-seqread`: reads of a file written and fdatasync'd in set-up whose cached pages are dropped
///   (`POSIX_FADV_DONTNEED`) just before the timed reads, so that they come from the disk. The asset downloads'
///   anchor. Where the file system ignores the advice the reads come from the page cache, which the run's note says.
final class DiskSequentialWorkload: Workload {
    enum Direction { case write, read }

    let direction: Direction
    var name: String { direction == .write ? "disk-seqwrite" : "disk-seqread" }
    let engine = "disk"
    let role = EngineRole.anchor
    /// Runs in its asset row's group, interleaved with it (WorkloadCatalog.Definition.joins).
    var accompaniesGroup: Bool { true }
    let unit = "MB/s"
    var latencyOf: String {
        direction == .write ? "one 1 MiB pwrite (buffered; the one fdatasync is in the throughput only)" : "one 1 MiB pread"
    }

    static let chunkSize = 1 << 20
    let totalBytes: Int
    private var path: String?
    private let chunk: [UInt8]

    init(_ direction: Direction, mebibytes: Int) {
        self.direction = direction
        totalBytes = mebibytes << 20
        var rng = SplitMix64(state: 1 << 20)
        chunk = (0..<Self.chunkSize).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        let path = dir + "/seq.dat"
        if direction == .read { try write(path) }
        self.path = path
    }

    /// Writes the whole file in 1 MiB pieces (the latency of each), then fdatasyncs it.
    @discardableResult
    private func write(_ path: String) throws -> [Double] {
        let file = try PosixFile(creating: path)
        var latencies: [Double] = []
        latencies.reserveCapacity(totalBytes / Self.chunkSize)
        try chunk.withUnsafeBytes { bytes in
            for i in 0..<(totalBytes / Self.chunkSize) {
                let t = Stopwatch()
                try file.write(bytes, at: i * Self.chunkSize)
                latencies.append(t.elapsed)
            }
        }
        try file.dataSync()
        return latencies
    }

    func run() throws -> RunMeasurement {
        guard let path = path.take() else { preconditionFailure("run() without setUp()") }
        if direction == .write {
            let clock = Stopwatch()
            let latencies = try write(path)
            return RunMeasurement(operations: Double(totalBytes) / 1e6, seconds: clock.elapsed, latencies: latencies)
        }
        let file = try PosixFile(readingFrom: path)
        let dropped = file.dropCachedPages()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 4096)
        defer { buffer.deallocate() }
        var latencies: [Double] = []
        latencies.reserveCapacity(totalBytes / Self.chunkSize)
        var offset = 0
        let clock = Stopwatch()
        while offset < totalBytes {
            let t = Stopwatch()
            let n = try file.read(into: buffer, at: offset)
            latencies.append(t.elapsed)
            guard n > 0 else { throw BenchError.io("pread (the file is shorter than it was written)", path) }
            offset += n
        }
        return RunMeasurement(
            operations: Double(totalBytes) / 1e6, seconds: clock.elapsed, latencies: latencies,
            note: dropped ? nil : "disk-seqread: posix_fadvise(DONTNEED) failed, so the reads may come from the page cache")
    }

    func tearDown() throws { path = nil }

    /// The disk's sequential write rate (MB/s) for `bytes` (rounded up to whole MiB), measured as `disk-seqwrite`
    /// does, in a file under `dir` that is removed afterwards: for workloads that report themselves next to it in
    /// the same run (`catchup`).
    static func writeRate(bytes: Int, in dir: String) throws -> Double {
        let w = DiskSequentialWorkload(.write, mebibytes: max(1, (bytes + chunkSize - 1) / chunkSize))
        let path = dir + "/seq-\(getpid()).dat"
        defer { unlink(path) }
        w.path = path
        return try w.run().throughput
    }
}
