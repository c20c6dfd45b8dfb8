import Cloudlet
import CloudletMaintenance
import CloudletStorage
import CloudletWire
import Foundation

/// Writes to stdout through one buffer (dumps and exports print a lot).
enum Out {
    nonisolated(unsafe) private static var buffer: [UInt8] = []
    /// Where output goes when set: the temp file of `export --output` (stdout otherwise).
    nonisolated(unsafe) static var file: (any File)? {
        didSet { fileOffset = 0 }
    }
    nonisolated(unsafe) private static var fileOffset: UInt64 = 0

    static func line(_ s: String) {
        buffer.append(contentsOf: s.utf8)
        buffer.append(0x0A)
        if buffer.count >= 1 << 16 { flush() }
    }

    static func json(_ v: JSONValue) { line(v.serialized()) }

    static func flush() {
        guard !buffer.isEmpty else { return }
        if let file {
            do throws(FileSystemError) { try file.write(buffer, at: fileOffset) } catch {
                buffer.removeAll()
                ToolCLI.fail("cannot write \(file.path): \(error)", code: 74)
            }
            fileOffset += UInt64(buffer.count)
            buffer.removeAll(keepingCapacity: true)
            return
        }
        buffer.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = write(1, raw.baseAddress! + done, raw.count - done)
                if n <= 0 {
                    if n < 0 && errno == EINTR { continue }
                    // stdout is gone (a closed pipe): nothing more to say.
                    exit(74)
                }
                done += n
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Writes a line to stderr.
func warn(_ s: String) {
    Progress.clear()
    FileHandle.standardError.write(Data((s + "\n").utf8))
}

/// A progress bar on stderr, shown only when stderr is a terminal (and not turned off with `--no-progress`).
enum Progress {
    nonisolated(unsafe) static var enabled = isatty(2) == 1
    nonisolated(unsafe) private static var lastDraw: UInt64 = 0
    nonisolated(unsafe) private static var started: UInt64 = 0
    nonisolated(unsafe) private static var phase = ""
    nonisolated(unsafe) private static var shown = false

    static func update(_ phase: String, done: UInt64, total: UInt64) {
        guard enabled else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        if phase != Self.phase {
            Self.phase = phase
            started = now
        }
        guard now - lastDraw >= 100_000_000 || done >= total else { return }
        lastDraw = now
        let fraction = total == 0 ? 1 : min(1, Double(done) / Double(total))
        let width = 30
        let filled = Int(fraction * Double(width))
        let seconds = Double(now - started) / 1e9
        let rate = seconds > 0 ? Double(done) / seconds : 0
        let bar = String(repeating: "=", count: filled) + (filled < width ? ">" : "") + String(repeating: " ", count: max(0, width - filled - 1))
        let text = "\r\u{1B}[K\(phase) [\(bar)] \(Int(fraction * 100))% \(bytes(done))/\(bytes(total)) \(bytes(UInt64(rate)))/s"
        FileHandle.standardError.write(Data(text.utf8))
        shown = true
    }

    static func handler(_ p: InspectionProgress) { update(p.phase, done: p.bytesDone, total: p.bytesTotal) }

    static func clear() {
        guard shown else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        shown = false
    }
}

/// `12.3 MB` (decimal units, as disks are sold).
func bytes(_ n: UInt64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB"]
    var v = Double(n)
    var u = 0
    while v >= 1000 && u < units.count - 1 {
        v /= 1000
        u += 1
    }
    return u == 0 ? "\(n) B" : String(format: "%.1f %@", v, units[u])
}

func percent(_ part: UInt64, of whole: UInt64) -> String {
    whole == 0 ? "0%" : String(format: "%.1f%%", Double(part) * 100 / Double(whole))
}

/// A left-aligned text table.
func table(_ rows: [[String]], indent: String = "  ") -> [String] {
    guard let first = rows.first else { return [] }
    var widths = [Int](repeating: 0, count: first.count)
    for r in rows { for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) } }
    return rows.map { r in
        indent + r.enumerated().map { i, c in i == r.count - 1 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
            .joined(separator: "  ")
    }
}

func name(_ path: String) -> String { String(path.split(separator: "/").last ?? Substring(path)) }

/// `2 run(s) (level 0: 1, level 1: 1), 81.8 kB, flushed at LSN 164, 2000 record(s), 3 tombstone(s)`: a partition's
/// index for info and stats.
func describe(_ index: IndexSummary) -> String {
    let levels = index.runsPerLevel.enumerated().filter { $0.element > 0 }.map { "level \($0.offset): \($0.element)" }
    var parts = ["\(index.runs) run(s)\(levels.isEmpty ? "" : " (" + levels.joined(separator: ", ") + ")")", bytes(index.bytes)]
    if let lsn = index.flushedLSN { parts.append("flushed at LSN \(lsn)\(index.generation.map { $0 > 0 ? " (compaction generation \($0))" : "" } ?? "")") }
    if let records = index.records, let tombstones = index.tombstones { parts.append("\(records) record(s), \(tombstones) tombstone(s)") }
    if let problem = index.problem { parts.append("not used: \(problem)") }
    return parts.joined(separator: ", ")
}

/// The members describing a partition's index in the JSON of info, verify and stats (none without an index):
/// `indexDirectory`, `indexRuns`, `indexBytes`, `indexLevels` (`level`, `runs`, `bytes`), `flushedLSN`,
/// `indexGeneration`, `indexRecords`, `indexTombstones`, `indexProblem`, `indexLeftovers`.
func indexMembers(_ index: IndexSummary?) -> [(String, JSONValue?)] {
    guard let index else { return [] }
    let levels = zip(index.runsPerLevel, index.bytesPerLevel).enumerated().map { level, t in
        JSONValue.members([("level", .int(level)), ("runs", .int(t.0)), ("bytes", .int(t.1))])
    }
    return [
        ("indexDirectory", .string(index.directory)), ("indexManifest", index.manifest.map(JSONValue.string)),
        ("indexRuns", .int(index.runs)), ("indexBytes", .int(index.bytes)), ("indexLevels", .array(levels)),
        ("flushedLSN", index.flushedLSN.map { .int($0) }), ("indexGeneration", index.generation.map { .int($0) }),
        ("indexRecords", index.records.map { .int($0) }), ("indexTombstones", index.tombstones.map { .int($0) }),
        ("indexProblem", index.problem.map(JSONValue.string)), ("indexLeftovers", .array(index.leftovers.map(JSONValue.string))),
    ]
}
