import CloudletCommandLine
import Foundation

/// The child processes of `scale` (``ScaleWorkload``): `cloudlet-bench --scale-child load|read --engine NAME
/// --dir DIR --records N [--batch B] [--reads R]`, left out of `--help` (only the parent runs them). Each prints a
/// ``ScaleChildReport`` as JSON on stdout and draws its progress on stderr.
///
/// - `load`: opens the engine on the empty `DIR`, saves records `0..<N` (random names) in atomic batches of B,
///   then closes it, which makes the load durable.
/// - `read`: reopens it, times the open plus one read, then reads R records drawn uniformly from `0..<N`.
///
/// Records are generated batch by batch (chunk by chunk for the reads) outside the timed calls, so the process
/// never holds more than a few thousand of them: its memory is the engine's, plus a baseline (the binary, the
/// Swift runtime, Foundation) measured before the engine is opened, plus R × 8 bytes of latency samples.
enum ScaleChild {
    static let flag = "--scale-child"
    /// Expected records generated and timed per `readEach` call.
    static let readChunk = 1_000
    /// The seed of the read sequence (the same on every engine).
    static let readSeed: UInt64 = 0x5CA1_E000

    /// Runs the child named by `arguments` (what follows ``flag``); returns the exit status.
    static func main(_ arguments: [String]) -> Int32 {
        do {
            let c: CommandLineOptions
            do {
                c = try CommandLineOptions(
                    parsing: arguments, valued: ["--engine", "--dir", "--records", "--batch", "--reads"],
                    positional: true)
            } catch {
                throw BenchError(.usage, "\(flag): \(error.message)")
            }
            guard let phase = c.positional.first, c.positional.count == 1 else {
                throw BenchError(.usage, "\(flag) needs one phase, load or read")
            }
            let name = try required(c, "--engine")
            guard let entry = EngineRegistry.all.first(where: { $0.name == name }) else {
                throw BenchError(.usage, "\(flag): no engine '\(name)'")
            }
            let dir = try required(c, "--dir")
            guard let records = try count(c, "--records") else { throw BenchError(.usage, "\(flag) needs --records N") }
            let report: ScaleChildReport
            switch phase {
            case "load": report = try load(entry, dir: dir, records: records, batchSize: try count(c, "--batch") ?? 200)
            case "read": report = try read(entry, dir: dir, records: records, reads: try count(c, "--reads") ?? 0)
            default: throw BenchError(.usage, "\(flag): unknown phase '\(phase)', expected load or read")
            }
            Console.progress(nil)
            print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
            return 0
        } catch {
            Console.progress(nil)
            return fail(error)
        }
    }

    private static func required(_ c: CommandLineOptions, _ name: String) throws -> String {
        do { return try c.required(name, "VALUE") } catch { throw BenchError(.usage, "\(flag): \(error.message)") }
    }

    private static func count(_ c: CommandLineOptions, _ name: String) throws -> Int? {
        do { return try c.integer(name, in: 1...Int.max) } catch { throw BenchError(.usage, "\(flag): \(error.message)") }
    }

    static func load(_ entry: EngineRegistry.Entry, dir: String, records: Int, batchSize: Int) throws -> ScaleChildReport {
        let baseline = try ProcessMemory.current()
        let engine = entry.make()
        try engine.open(dir: dir, data: .none, settings: ScaleWorkload.settings)
        let cache = engine.cacheDescription
        let generator = RecordGenerator(names: .random)
        let progress = Progress("scale · \(entry.name) · load", total: records)
        var (saveSeconds, generateSeconds) = (0.0, 0.0)
        do {
            for start in stride(from: 0, to: records, by: batchSize) {
                var batch: [GeneratedRecord] = []
                generateSeconds += Stopwatch.time { batch = (start..<min(start + batchSize, records)).map(generator.record) }
                saveSeconds += try Stopwatch.time { try engine.saveRecords(batch[...]) }
                progress.update(start + batch.count)
            }
        } catch {
            try? engine.close()
            throw error
        }
        let loaded = try ProcessMemory.current()
        Console.progress("scale · \(entry.name) · close")
        let closeSeconds = try Stopwatch.time { try engine.close() }
        let phase = ScaleLoadPhase(
            baseline: baseline, loaded: loaded, closed: try ProcessMemory.current(), saveSeconds: saveSeconds,
            closeSeconds: closeSeconds, generateSeconds: generateSeconds)
        return ScaleChildReport(cache: cache, load: phase)
    }

    static func read(_ entry: EngineRegistry.Entry, dir: String, records: Int, reads: Int) throws -> ScaleChildReport {
        let generator = RecordGenerator(names: .random)
        var latencies: [UInt64] = []
        latencies.reserveCapacity(reads)
        let first = generator.record(records - 1)
        let baseline = try ProcessMemory.current()
        Console.progress("scale · \(entry.name) · open")
        let engine = entry.make()
        let openSeconds = try Stopwatch.time {
            try engine.open(dir: dir, data: .none, settings: ScaleWorkload.settings)
            try engine.read(first)
        }
        var readSeconds = 0.0
        let opened: ProcessMemory
        do {
            opened = try ProcessMemory.current()
            let progress = Progress("scale · \(entry.name) · read", total: reads)
            for (chunk, start) in stride(from: 0, to: reads, by: readChunk).enumerated() {
                let indexes = KeyDistribution.uniform.indexes(
                    min(readChunk, reads - start), of: records, seed: readSeed &+ UInt64(chunk))
                let expected = indexes.map(generator.record)
                let clock = Stopwatch()
                let timed = try engine.readEach(expected[...])
                readSeconds += clock.elapsed
                latencies += timed.map { UInt64(($0 * 1e9).rounded()) }
                progress.update(start + indexes.count)
            }
        } catch {
            try? engine.close()
            throw error
        }
        let afterReads = try ProcessMemory.current()
        let cache = engine.cacheDescription
        try engine.close()
        let phase = ScaleReadPhase(
            baseline: baseline, opened: opened, afterReads: afterReads, openSeconds: openSeconds,
            readSeconds: readSeconds)
        return ScaleChildReport(cache: cache, read: phase, latencyNanoseconds: latencies)
    }
}

/// A progress line that redraws at most once per percent: `scale · cloudlet · load 42% (420,000 of 1,000,000)`.
private final class Progress {
    let label: String
    let total: Int
    private var shown = -1

    init(_ label: String, total: Int) {
        self.label = label
        self.total = total
    }

    func update(_ done: Int) {
        let percent = total > 0 ? done * 100 / total : 100
        guard percent != shown else { return }
        shown = percent
        Console.progress(
            "\(label) \(percent)% (\(TablePrinter.number(Double(done))) of \(TablePrinter.number(Double(total))))")
    }
}
