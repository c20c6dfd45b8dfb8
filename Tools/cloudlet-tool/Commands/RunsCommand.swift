import CloudletCommandLine
import CloudletCore
import CloudletStorage
import CloudletWire
import Foundation

/// `cloudlet-tool runs`: the LSM building blocks on disk (SortedRunFormat.md) — one sorted run file, or an LSM
/// directory (its `CURRENT`, manifest and live runs). Read-only; the directory's owner must be stopped.
enum RunsCommand: Command {
    static let help = """
        USAGE: cloudlet-tool runs <verify|dump|stats> PATH [--json] [--tombstones] [--limit N]

        PATH is a sorted run file (<number>.run) or an LSM directory (with CURRENT, MANIFEST-… and runs). Nothing is
        written: a directory's manifest is read, not rewritten, and leftovers are listed, not deleted.

          verify   Check every block of every run (checksums, decompression, key order, separators, bloom filter,
                   properties) and the manifest; one line per defect naming the file and byte offset. Exit 0 only
                   when all is well, 65 otherwise.
          dump     Every entry in key order: of a run, all of them (tombstones included); of a directory, the
                   newest live value of each key across its runs (--tombstones: deletions too).
          stats    Per run: level, entries, tombstones, blocks, raw and stored bytes, key and sequence ranges; per
                   level totals; the manifest's log position; leftover files.

        OPTIONS
          --tombstones    dump: also the keys whose newest entry is a deletion (directories).
          --limit N       dump: at most N entries.
          --json          JSON output (dump: JSON lines).
          -h, --help      This help.
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(
            args, valued: ["--limit"], flags: ["--json", "--tombstones"], positional: true, help: help)
        guard o.positional.count == 2, let action = Action(rawValue: o.positional[0]) else {
            throw UsageError(message: "expected an action (verify, dump or stats) and a PATH")
        }
        let source = try Source(path: o.positional[1])
        defer { source.close() }
        let json = o.has("--json")
        switch action {
        case .verify: return verify(source, json: json)
        case .dump:
            try dump(source, json: json, tombstones: o.has("--tombstones"), limit: try o.integer("--limit", in: 1...Int.max) ?? .max)
            return 0
        case .stats:
            stats(source, json: json)
            return 0
        }
    }

    enum Action: String {
        case verify, dump, stats
    }

    /// A run file, or a directory's manifest and runs.
    struct Source {
        var path: String
        /// Nil for a single run file.
        var version: LSMVersion?
        var manifestNote: String?
        var runs: [(metadata: LSMRunMetadata?, reader: SortedRunReader)] = []
        /// Runs that would not open, as findings.
        var unopened: [SortedRunFinding] = []
        var leftovers: [String] = []

        init(path: String) throws {
            self.path = path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw CloudletError(.unknownItem, "no run file or LSM directory at \(path)")
            }
            guard isDirectory.boolValue else {
                let number = SortedRunFile.number(fileName: (path as NSString).lastPathComponent) ?? 0
                runs = [(nil, try SortedRunReader(path: path, fileNumber: number))]
                return
            }
            var configuration = Manifest.Configuration()
            configuration.readOnly = true
            let manifest = try Manifest(directory: path, configuration: configuration)
            defer { manifest.close() }
            guard manifest.openReport.manifest != nil else {
                throw CloudletError(.unknownItem, "\(path) is not an LSM directory (no CURRENT)")
            }
            version = manifest.current
            manifestNote = manifest.openReport.tornTail.map { "torn last edit in \(manifest.openReport.manifest!): \($0)" }
            for metadata in manifest.current.runs {
                let runPath = path + "/" + SortedRunFile.name(metadata.fileNumber)
                do {
                    runs.append((metadata, try SortedRunReader(path: runPath, fileNumber: metadata.fileNumber)))
                } catch {
                    let message = (error as? CloudletError)?.message ?? "\(error)"
                    unopened.append(SortedRunFinding(path: runPath, offset: 0, problem: message))
                }
            }
            let live = Set(manifest.current.runs.map(\.fileNumber))
            let current = manifest.openReport.manifest.map { ($0 as NSString).lastPathComponent }
            leftovers = try FileManager.default.contentsOfDirectory(atPath: path).filter { name in
                if let n = SortedRunFile.number(fileName: name) { return !live.contains(n) }
                return name.hasSuffix(".tmp") || (name.hasPrefix("MANIFEST-") && name != current)
            }.sorted()
        }

        func close() { for run in runs { run.reader.close() } }
    }

    static func verify(_ source: Source, json: Bool) -> Int32 {
        var findings = source.unopened
        for run in source.runs { findings += run.reader.verify() }
        if json {
            Out.json(
                .members([
                    "path": .string(source.path), "runs": .int(source.runs.count + source.unopened.count),
                    "findings": .array(findings.map { f in
                        .members(["file": .string(f.path), "offset": .int(f.offset), "problem": .string(f.problem)])
                    }),
                    "note": source.manifestNote.map(JSONValue.string),
                ]))
        } else {
            for f in findings { Out.line(f.description) }
            if let note = source.manifestNote { Out.line("note: \(note)") }
            Out.line(findings.isEmpty ? "ok: \(source.runs.count) runs verified" : "\(findings.count) defects found")
        }
        return findings.isEmpty ? 0 : 65
    }

    static func dump(_ source: Source, json: Bool, tombstones: Bool, limit: Int) throws {
        let iterator: any LSMIterator =
            source.version == nil
            ? source.runs[0].reader.makeIterator()
            : MergingIterator(source.runs.map { $0.reader.makeIterator() }, dropTombstones: !tombstones)
        try iterator.seekToFirst()
        var count = 0
        while count < limit, let e = iterator.current {
            if json {
                Out.json(
                    .members([
                        "key": .string(hex(e.key)), "sequence": .int(e.sequence), "deleted": .bool(e.isTombstone),
                        "value": e.isTombstone ? nil : .string(hex(e.value)),
                    ]))
            } else {
                let what = e.isTombstone ? "deleted" : "\(e.value.count) bytes \(LSMKey.printable(e.value.prefix(32)))"
                Out.line("\(LSMKey.printable(e.key)) @\(e.sequence) \(what)")
            }
            count += 1
            try iterator.advance()
        }
    }

    static func stats(_ source: Source, json: Bool) {
        var rows: [JSONValue] = []
        var levels: [Int: (runs: Int, bytes: UInt64, entries: UInt64)] = [:]
        for (metadata, reader) in source.runs {
            let p = reader.properties
            let stored = ((try? reader.dataBlocks) ?? []).reduce(0) { $0 + $1.size }  // a damaged index: `runs verify` names it
            let level = metadata?.level
            if let level {
                let t = levels[level] ?? (0, 0, 0)
                levels[level] = (t.runs + 1, t.bytes + reader.fileSize, t.entries + p.entryCount)
            }
            if json {
                rows.append(
                    .members([
                        "file": .string(reader.path), "level": level.map { .int($0) }, "entries": .int(p.entryCount),
                        "tombstones": .int(p.tombstoneCount), "blocks": .int(p.dataBlockCount),
                        "rawBytes": .int(p.rawKeyBytes + p.rawValueBytes), "storedDataBytes": .int(stored),
                        "fileBytes": .int(reader.fileSize), "smallestKey": .string(hex(p.smallestKey)),
                        "largestKey": .string(hex(p.largestKey)), "minSequence": .int(p.minSequence),
                        "maxSequence": .int(p.maxSequence), "creator": .string(p.creator),
                        "created": .int(p.creationTime), "formatVersion": .int(p.formatVersion),
                    ]))
            } else {
                Out.line(
                    "run \(reader.path)\(level.map { " level \($0)" } ?? ""): \(p.entryCount) entries (\(p.tombstoneCount) tombstones) in \(p.dataBlockCount) blocks, \(p.rawKeyBytes + p.rawValueBytes) raw bytes stored as \(stored) (\(reader.fileSize) file bytes), keys \(LSMKey.printable(p.smallestKey))…\(LSMKey.printable(p.largestKey)), sequences \(p.minSequence)…\(p.maxSequence), by \(p.creator.isEmpty ? "?" : p.creator)"
                )
            }
        }
        let levelRows = levels.keys.sorted().map { l in (l, levels[l]!) }
        if json {
            Out.json(
                .members([
                    "path": .string(source.path), "runs": .array(rows),
                    "levels": .array(levelRows.map { l, t in
                        .members(["level": .int(l), "runs": .int(t.runs), "bytes": .int(t.bytes), "entries": .int(t.entries)])
                    }),
                    "logPosition": source.version.map { .string(hex($0.logPosition)) },
                    "lastSequence": source.version.map { .int($0.lastSequence) },
                    "leftovers": .array(source.leftovers.map(JSONValue.string)),
                    "unopened": .array(source.unopened.map { .string($0.description) }),
                ]))
            return
        }
        for (l, t) in levelRows { Out.line("level \(l): \(t.runs) runs, \(t.entries) entries, \(t.bytes) bytes") }
        if let v = source.version {
            Out.line("log position \(hex(v.logPosition).isEmpty ? "(none)" : hex(v.logPosition)), last sequence \(v.lastSequence)")
        }
        for f in source.unopened { Out.line("unreadable: \(f)") }
        for name in source.leftovers { Out.line("leftover: \(name)") }
    }

    static func hex(_ bytes: some Collection<UInt8>) -> String { LSMKey.hex(bytes) }
}
