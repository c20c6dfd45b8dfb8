import Foundation

/// `scale` (issue 12): how an engine holds up at millions of records. Load `records` records of ~240 B (random
/// names) in atomic batches, durability `os`, and close (durable); reopen in a fresh process and time the open;
/// then `reads` point reads drawn uniformly from the loaded records. Reports reads/s and read latency in the main
/// table, and in ``ScaleFigures`` the load rate, bytes on disk per record, open time and resident memory (VmRSS,
/// VmHWM) per record at each phase, next to the engine's configured cache.
///
/// Each phase runs in a child process of its own (``ScaleChild``), so that memory is the engine's and what
/// opening costs is not mixed with what loading left behind. One run, no warm-up: at full size a run takes
/// minutes per engine.
final class ScaleWorkload: RecordWorkload {
    /// How every engine is opened: durability `os` (as `fillrandom`), SQLite's page cache and RocksDB's block cache
    /// at 8 MiB (RocksDB's default; SQLite's is 2 MB), Cloudlet's record cache at its default of 10,000 records.
    static let settings = EngineSettings(durability: .os, cacheBytes: 8 << 20)

    let records: Int
    let reads: Int
    let batchSize: Int
    private var dir = ""

    init(engine entry: EngineRegistry.Entry, records: Int, reads: Int, batchSize: Int) {
        self.records = records
        self.reads = reads
        self.batchSize = batchSize
        super.init(
            name: "scale", engine: entry, unit: "reads/s",
            latencyOf: "one get by record name, uniform over \(TablePrinter.number(Double(records))) records, "
                + "in a store reopened by a fresh process, decoded")
    }

    override var singleRun: Bool { true }

    override func setUp(in dir: String, fixtures: Fixtures) throws {
        self.dir = dir
    }

    override func run() throws -> RunMeasurement {
        let common = [ScaleChild.flag, "--engine", engine, "--dir", dir, "--records", String(records)]
        let load = try child(common + ["load", "--batch", String(batchSize)])
        let (bytes, files) = try Self.usage(of: dir)
        let read = try child(common + ["read", "--reads", String(reads)])
        guard let loaded = load.load, let reopened = read.read, let latencies = read.latencyNanoseconds else {
            throw BenchError(.engine, "scale on \(engine): a child's report lacks its phase")
        }
        let figures = ScaleFigures(
            records: records, reads: reads, batchSize: batchSize, cache: read.cache, load: loaded, read: reopened,
            diskBytes: bytes, files: files)
        return RunMeasurement(
            operations: Double(reads), seconds: reopened.readSeconds, latencies: latencies.map { Double($0) / 1e9 },
            scale: figures)
    }

    private func child(_ arguments: [String]) throws -> ScaleChildReport {
        let output = try SelfProcess.run(arguments)
        do {
            return try JSONDecoder().decode(ScaleChildReport.self, from: output)
        } catch {
            throw BenchError(.engine, "scale on \(engine): cannot decode the child's report: \(error)")
        }
    }

    /// The sizes of the regular files under `dir` (recursively), added up, and how many there are.
    static func usage(of dir: String) throws -> (bytes: Int, files: Int) {
        let fm = FileManager.default
        guard let names = fm.enumerator(atPath: dir) else { throw BenchError.io("opendir", dir) }
        var (bytes, files) = (0, 0)
        for case let name as String in names {
            let attributes = try fm.attributesOfItem(atPath: dir + "/" + name)
            guard attributes[.type] as? FileAttributeType == .typeRegular else { continue }
            bytes += (attributes[.size] as? NSNumber)?.intValue ?? 0
            files += 1
        }
        return (bytes, files)
    }
}
