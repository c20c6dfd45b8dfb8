import CloudletCore

/// `disk-append-sync`: 4 KiB appends to a fresh file, each followed by `fdatasync`. The ceiling for any engine
/// that makes every commit durable on its own and appends to a growing file: per-commit durability costs at
/// least one of these.
///
/// The same measurement also runs as rows of `fillsync` and `fillsync-concurrent` (one write per record,
/// reported in records/s), interleaved with the engines' runs, so that their fraction of the limit compares
/// numbers taken at the same time on this noisy machine. There it runs twice: `disk` appends to a growing file
/// like this workload; `disk-prewritten` overwrites the blocks of a file written and synced beforehand (in
/// `setUp`), so that `fdatasync` has no file size or block allocation to journal: the physical limit, which
/// engines that reuse or pre-write their log files (SQLite's WAL, RocksDB's preallocated WAL) get closer to.
final class DiskAppendSyncWorkload: Workload {
    let name: String
    let engine: String
    let role = EngineRole.anchor
    let unit: String
    let latencyOf: String
    /// True for the rows of a `fillsync*` group.
    let comparesToSyncLimit: Bool
    /// The `disk` rows of a `fillsync*` group stay in when `--filter` picks an engine of that group.
    var accompaniesGroup: Bool { comparesToSyncLimit }

    static let blockSize = 4096
    let appends: Int
    /// Overwrite a pre-written file instead of appending.
    let prewritten: Bool
    private var file: PosixFile?
    private let block: [UInt8]

    /// The stand-alone workload (`syncs/s`), or, with `limitOf`, a `disk` row of that workload (`records/s`).
    init(appends: Int, limitOf workload: String? = nil, prewritten: Bool = false) {
        precondition(workload != nil || !prewritten, "the stand-alone disk-append-sync appends")
        name = workload ?? "disk-append-sync"
        engine = prewritten ? "disk-prewritten" : "disk"
        unit = workload == nil ? "syncs/s" : "records/s"
        latencyOf = prewritten ? "one 4 KiB pwrite over written blocks + fdatasync" : "one 4 KiB pwrite + fdatasync"
        comparesToSyncLimit = workload != nil
        self.appends = appends
        self.prewritten = prewritten
        var rng = SplitMix64(state: 4096)
        block = (0..<Self.blockSize).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        let file = try PosixFile(creating: dir + "/append.dat")
        if prewritten {
            let chunk = [UInt8](repeating: 0, count: 1 << 20)
            try chunk.withUnsafeBytes { bytes in
                for offset in stride(from: 0, to: appends * Self.blockSize, by: chunk.count) {
                    try file.write(bytes, at: offset)
                }
            }
            try file.dataSync()
        }
        self.file = consume file
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
