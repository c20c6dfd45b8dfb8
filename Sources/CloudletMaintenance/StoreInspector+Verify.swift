import Cloudlet
import CloudletCore
import CloudletStorage

/// What `cloudlet-tool verify` found.
package struct VerifyReport: Sendable {
    package struct Finding: Sendable, Hashable {
        package var severity: LogFinding.Severity
        package var partition: Int
        /// The file (segment, checkpoint, marker…), or the name a missing segment should have.
        package var file: String
        package var offset: UInt64?
        package var message: String
        /// A damaged byte range of a segment (see ``LogFinding/damaged``).
        package var damaged: Range<UInt64>? = nil
    }

    package struct Partition: Sendable {
        package var index: Int
        package var segments = 0
        package var frames = 0
        package var bytes: UInt64 = 0
        package var lastLSN: UInt64 = 0
        package var mutations = 0
        /// The LSN the next open starts replaying the log after: the index's flush, or (a store of format 3) the
        /// checkpoint's; nil when it replays the whole log.
        package var checkpointLSN: UInt64?
        /// The partition's index (store format 4), nil when it has none.
        package var indexSummary: IndexSummary?
        /// The LSN the index's flushed state covers (nil: no index, or none readable).
        package var flushedLSN: UInt64? { indexSummary?.flushedLSN }
        /// Key directory entries checked against the frames they point at.
        package var entriesChecked = 0
        package var compactionGeneration: UInt32 = 0
        /// The catalog version its commits were validated against (from the replay; nil when the log is damaged).
        package var catalogVersion: UInt64?
    }

    package var findings: [Finding] = []
    package var partitions: [Partition] = []
    /// The catalog's log (nil: a format-1 store, whose catalog is in partition 0).
    package var catalog: CatalogVerification?
    package var deep = false

    /// No error (warnings allowed).
    package var isClean: Bool { !findings.contains { $0.severity == .error } }
}

extension StoreInspector {
    /// Checks every partition without opening the store: every segment header and frame (checksum, LZ4, LSN
    /// continuity, gaps legal only inside compacted segments), every commit payload and record; the index
    /// (`p*/index`: `CURRENT`, manifest, every block of every live run, the flushed state and its log position:
    /// generation, LSN against the log's end, start position) — or, in a store of format 3, the checkpoints — and
    /// every key directory entry of the flushed state (or checkpoint) against the frame it points at. `deep` also
    /// replays the whole log from scratch and compares the state with flushed state + tail. Never throws for bad
    /// data: everything wrong is a finding.
    package func verify(deep: Bool, progress: ProgressHandler? = nil) throws -> VerifyReport {
        var report = VerifyReport()
        report.deep = deep
        for p in 0..<partitionCount {
            try verifyPartition(p, deep: deep, report: &report, progress: progress)
        }
        var versions: [Int: UInt64] = [:]
        for part in report.partitions { if let v = part.catalogVersion { versions[part.index] = v } }
        try verifyCatalog(deep: deep, partitionVersions: versions, report: &report, progress: progress)
        report.findings += permissionFindings()
        return report
    }

    private struct Expectation {
        var zone: ZoneKey
        var name: String
        var entry: RecordEntry
    }

    /// The state an open starts from and replays the log after: an index's flushed state or a checkpoint.
    private struct StartState {
        var state: PartitionState
        var lsn: UInt64
        /// The index's manifest, or the checkpoint file: what findings about it name.
        var path: String
        var next: FramePosition?
        var source: Source
        /// The index's files (empty for a checkpoint).
        var files: [String]

        enum Source: String {
            case index, checkpoint
        }

        /// The file `error` (reading the state) names, else ``path``.
        func file(naming error: any Error) -> String { StoreInspector.file(naming: error, among: files) ?? path }
    }

    private func verifyPartition(
        _ p: Int, deep: Bool, report: inout VerifyReport, progress: ProgressHandler?
    ) throws {
        let dir = partitionDirectory(p)
        var part = VerifyReport.Partition(index: p)
        func finding(_ severity: LogFinding.Severity, _ file: String, _ offset: UInt64?, _ message: String) {
            report.findings.append(VerifyReport.Finding(severity: severity, partition: p, file: file, offset: offset, message: message))
        }
        guard fileSystem.fileExists(dir) else {
            finding(.error, dir, nil, "the partition directory is missing")
            report.partitions.append(part)
            return
        }
        let marker: CompactionMarker?
        do { marker = try CompactionMarker.load(directory: dir, fileSystem: fileSystem) } catch { marker = nil }
        part.compactionGeneration = marker?.generation ?? 0

        // The state an open would start from, checked on its own first: the index's flushed state, else (a store
        // of format 3, or an index the next open rebuilds) the newest usable checkpoint.
        let index = openIndex(dir, generation: part.compactionGeneration, finding: finding)
        defer { index?.tree?.close() }
        part.indexSummary = index?.summary
        if let tree = index?.tree {
            let bytes = index!.summary.bytes
            progress?(InspectionProgress(phase: "verify index of partition \(p)", bytesDone: 0, bytesTotal: bytes))
            for f in tree.verify() {
                finding(.error, f.path, f.offset, "damaged index run: \(f.problem); `cloudlet-tool repair` rebuilds the index from the log")
            }
            progress?(InspectionProgress(phase: "verify index of partition \(p)", bytesDone: bytes, bytesTotal: bytes))
        }
        let start: StartState?
        if let flushed = index?.flushed {
            start = StartState(
                state: flushed.state, lsn: flushed.lsn, path: index!.manifestPath, next: flushed.next, source: .index,
                files: index!.files)
            for f in (try? CheckpointStore(directory: dir, fileSystem: fileSystem).list().checkpoints) ?? [] {
                finding(.warning, f.path, nil, "a checkpoint of store format 3, unused: the index is read instead (`cloudlet-tool repair` sets it aside)")
            }
        } else {
            start = try openableCheckpoint(in: dir, finding: finding) { f -> (PartitionState, FramePosition?)? in
                guard let st = try PartitionState.decodeCheckpoint(f.payload, next: f.next) else {
                    finding(.warning, f.path, nil, "a checkpoint of an older format: ignored, the next open replays the log")
                    return nil
                }
                guard st.compactionGeneration == part.compactionGeneration else {
                    finding(
                        .warning, f.path, nil,
                        "taken under compaction generation \(st.compactionGeneration), the log is at \(part.compactionGeneration): ignored, the next open replays the log")
                    return nil
                }
                return (st, f.next)
            }.map { StartState(state: $0.value.0, lsn: $0.lsn, path: $0.path, next: $0.value.1, source: .checkpoint, files: []) }
        }
        part.checkpointLSN = start?.lsn

        // Every key directory entry of that state, by where it points. An index's entries are read from its runs:
        // a damaged block is a finding (the entries read before it are still checked), and so is one met while
        // replaying the tail onto the state; either stops the comparisons with that state.
        var expected: [UInt64: [UInt64: [Expectation]]] = [:]
        var unreadable = false
        if let start {
            do {
                for key in start.state.keys.zoneKeys {
                    try start.state.records(in: key).forEach { name, e in
                        expected[e.position.segment, default: [:]][e.position.offset, default: []]
                            .append(Expectation(zone: key, name: name, entry: e))
                    }
                }
            } catch {
                unreadable = true
                finding(.error, start.file(naming: error), nil, "the \(start.source.rawValue)'s key directory cannot be read: \(Self.message(error))")
            }
        }
        var segmentPaths: [UInt64: String] = [:]
        var tail = start?.state ?? PartitionState()
        var full = PartitionState()
        let replayFull = deep || start == nil
        let afterLSN = start?.lsn ?? 0
        var hintFound = false
        let walker = LogWalker(directory: dir, fileSystem: fileSystem)
        let total = (try? walker.totalBytes()) ?? 0
        let walk = try walker.walk(progress: { progress?(InspectionProgress(phase: "verify partition \(p)", bytesDone: $0, bytesTotal: total)) }) { frame in
            segmentPaths[frame.position.segment] = frame.path
            if let next = start?.next, next.segment == frame.position.segment, next.offset == frame.position.offset {
                hintFound = true
            }
            guard frame.type == Commit.frameType else {
                finding(.error, frame.path, frame.position.offset, "frame LSN \(frame.lsn) has unknown type \(frame.type)")
                return
            }
            let decoded: (commit: Commit, slots: [Int: Commit.Slot], sizes: [UInt32])
            let payload: [UInt8]
            do {
                payload = try frame.payload()
                decoded = try Commit.decode(payload)
            } catch let e as CloudletError {
                finding(.error, frame.path, frame.position.offset, "frame LSN \(frame.lsn): \(e.message)")
                return
            }
            part.mutations += decoded.commit.mutations.count
            let costs = Commit.costs(sizes: decoded.sizes, frameLength: frame.position.length)
            if replayFull {
                try full.apply(decoded.commit, lsn: frame.lsn, position: frame.position, slots: decoded.slots, costs: costs)
            }
            if let start, !unreadable && frame.lsn > afterLSN {
                do {
                    try tail.apply(decoded.commit, lsn: frame.lsn, position: frame.position, slots: decoded.slots, costs: costs)
                } catch {
                    unreadable = true
                    finding(
                        .error, start.file(naming: error), nil,
                        "replaying LSN \(frame.lsn) onto the \(start.source.rawValue)'s state failed: \(Self.message(error))")
                }
            }
            // The entries of the state an open starts from that point here must find their version.
            guard let here = expected[frame.position.segment]?.removeValue(forKey: frame.position.offset) else { return }
            for x in here {
                part.entriesChecked += 1
                if let problem = Self.check(x.entry, name: x.name, zone: x.zone, against: frame, decoded, payload) {
                    finding(
                        .error, frame.path, frame.position.offset,
                        "the \(start?.source.rawValue ?? "checkpoint")'s key directory entry for record '\(x.name)' of \(x.zone.canonicalName) \(problem)")
                } else if deep, let start, !unreadable,
                    case .putRecord(_, let r, _)? = decoded.commit.mutations.indices.first(where: { decoded.commit.index($0) == x.entry.index })
                        .map({ decoded.commit.mutations[$0] })
                {
                    // The values the secondary indexes' keys are derived from (checked against the keys below) must
                    // be the record's.
                    do {
                        if let problem = try start.state.storedValuesProblem(x.zone, r) {
                            finding(.error, start.path, nil, "the \(start.source.rawValue)'s secondary indexes: \(problem)")
                        }
                    } catch {
                        unreadable = true
                        finding(.error, start.file(naming: error), nil, "the \(start.source.rawValue)'s secondary indexes cannot be read: \(Self.message(error))")
                    }
                }
            }
        }
        for f in walk.findings {
            report.findings.append(
                VerifyReport.Finding(
                    severity: f.severity, partition: p, file: f.path, offset: f.offset, message: f.message, damaged: f.damaged))
        }
        part.segments = walk.segments.count
        part.frames = walk.segments.reduce(0) { $0 + $1.frames }
        part.bytes = walk.segments.reduce(0) { $0 + $1.size }
        part.lastLSN = walk.lastLSN

        if let start {
            // Entries past the log's end are the one finding below.
            var pastEnd = 0
            for (segment, offsets) in expected {
                for (offset, xs) in offsets {
                    for x in xs {
                        part.entriesChecked += 1
                        if x.entry.lsn > walk.lastLSN {
                            pastEnd += 1
                            continue
                        }
                        finding(
                            .error, segmentPaths[segment] ?? "segment \(segment)", offset,
                            "the \(start.source.rawValue)'s key directory entry for record '\(x.name)' of \(x.zone.canonicalName) (LSN \(x.entry.lsn)) points where no intact frame starts")
                    }
                }
            }
            if start.lsn > walk.lastLSN {
                let entries = pastEnd > 0 ? " (\(pastEnd) of its key directory entries point past it)" : ""
                finding(
                    .error, start.path, nil,
                    start.source == .index
                        ? "the index covers LSN \(start.lsn) but the log ends at LSN \(walk.lastLSN)\(entries): the store does not open until `cloudlet-tool repair` rebuilds the index from the log"
                        : "the checkpoint covers LSN \(start.lsn) but the log ends at LSN \(walk.lastLSN)\(entries)")
            } else if let next = start.next, !hintFound, next.offset != walk.segments.first(where: { $0.firstLSN == next.segment })?.size {
                finding(
                    .warning, start.path, nil,
                    "its start position (segment \(next.segment) offset \(next.offset)) is not a frame boundary: the next open scans the log from the start")
            }
            if walk.isClean && !unreadable && start.lsn <= walk.lastLSN {
                // A compacted log may end in LSNs whose frames were dropped: both states are at the log's end.
                tail.lastLSN = walk.lastLSN
                full.lastLSN = walk.lastLSN
                if deep { compare(tail, full, start: start, finding) }
            }
        }
        if walk.isClean && !unreadable { part.catalogVersion = (start == nil ? full : tail).catalogVersion }
        if walk.isClean && replayFull {
            let live = full.segmentLive.filter { $0.value < 0 }
            for (segment, bytes) in live {
                finding(.error, segmentPaths[segment] ?? "segment \(segment)", nil, "live-byte accounting went negative (\(bytes))")
            }
        }
        report.partitions.append(part)
    }

    /// Whether `entry` (record `name` of `zone`) finds its version in `frame`; what is wrong otherwise.
    private static func check(
        _ entry: RecordEntry, name: String, zone: ZoneKey, against frame: StoredFrame,
        _ decoded: (commit: Commit, slots: [Int: Commit.Slot], sizes: [UInt32]), _ payload: [UInt8]
    ) -> String? {
        guard frame.lsn == entry.lsn else { return "expects LSN \(entry.lsn), the frame there is LSN \(frame.lsn)" }
        guard frame.position.length == entry.position.length else {
            return "expects a frame of \(entry.position.length) bytes, the frame there has \(frame.position.length)"
        }
        guard let k = (0..<decoded.commit.mutations.count).first(where: { decoded.commit.index($0) == entry.index }) else {
            return "expects mutation \(entry.index) of LSN \(entry.lsn), which the frame does not hold"
        }
        switch decoded.commit.mutations[k] {
        case .putRecord(let z, let r, _):
            guard !entry.deleted else { return "is a tombstone but the frame holds a version of it" }
            guard z == zone, r.recordName == name else { return "finds record '\(r.recordName)' of \(z.canonicalName) instead" }
            guard decoded.slots[k] == entry.slot else { return "expects bytes \(entry.slot) of the payload, the record is at \(decoded.slots[k].map { "\($0)" } ?? "none")" }
            guard r.changeTag ?? "" == entry.changeTag else { return "expects version '\(entry.changeTag)', the frame holds '\(r.changeTag ?? "")'" }
        case .deleteRecord(let z, let n, _, _, _):
            guard entry.deleted, z == zone, n == name else { return "finds the deletion of '\(n)' of \(z.canonicalName) instead" }
        default:
            return "finds no record mutation at index \(entry.index)"
        }
        return nil
    }

    /// Reports every difference between the state from the flushed index (or checkpoint) + tail and the one from a
    /// full replay; a damaged index block that stops the comparison is one more.
    private func compare(_ a: PartitionState, _ b: PartitionState, start: StartState, _ finding: FindingSink) {
        var problems: [String] = []
        do { try differences(a, b, source: start.source.rawValue, into: &problems) } catch {
            problems.append("the \(start.source.rawValue)'s key directory cannot be read: \(Self.message(error))")
        }
        // The secondary indexes are not all in the log (builds add what predates an index): checked on their own.
        do {
            for problem in try a.secondaryIndexProblems() {
                finding(.error, start.path, nil, "the \(start.source.rawValue)'s secondary indexes: \(problem)")
            }
        } catch {
            finding(.error, start.file(naming: error), nil, "the \(start.source.rawValue)'s secondary indexes cannot be read: \(Self.message(error))")
        }
        for problem in problems.prefix(50) {
            finding(.error, start.path, nil, "the \(start.source.rawValue) + log tail and a full replay of the log disagree: \(problem)")
        }
        if problems.count > 50 {
            finding(.error, start.path, nil, "… and \(problems.count - 50) more differences")
        }
    }

    private func differences(_ a: PartitionState, _ b: PartitionState, source: String, into problems: inout [String]) throws {
        if a.lastLSN != b.lastLSN { problems.append("last LSN \(a.lastLSN) vs \(b.lastLSN)") }
        if a.purgedThroughLSN != b.purgedThroughLSN { problems.append("purged through LSN \(a.purgedThroughLSN) vs \(b.purgedThroughLSN)") }
        for key in Set(a.keys.zoneKeys).union(b.keys.zoneKeys).sorted(by: { $0.canonicalName < $1.canonicalName }) {
            guard let za = a.zone(key), let zb = b.zone(key) else {
                problems.append("zone \(key.canonicalName) exists only in \(a.zone(key) == nil ? "the full replay" : "the \(source)")")
                continue
            }
            if za.createdLSN != zb.createdLSN || za.lastChangeLSN != zb.lastChangeLSN {
                problems.append("zone \(key.canonicalName): created/last change \(za.createdLSN)/\(za.lastChangeLSN) vs \(zb.createdLSN)/\(zb.lastChangeLSN)")
            }
            if za.liveCount != zb.liveCount || za.entryCount != zb.entryCount {
                problems.append("zone \(key.canonicalName): records/entries \(za.liveCount)/\(za.entryCount) vs \(zb.liveCount)/\(zb.entryCount)")
            }
            let names = try a.records(in: key).all().map(\.name) + b.records(in: key).all().map(\.name)
            for name in Set(names).sorted() {
                let ea = try a.entry(key, name)
                let eb = try b.entry(key, name)
                if ea != eb {
                    let describe = { (e: RecordEntry?) in
                        e.map { "LSN \($0.lsn).\($0.index) \($0.deleted ? "tombstone" : "'\($0.changeTag)' at \($0.position)")" } ?? "nothing"
                    }
                    problems.append("record '\(name)' of \(key.canonicalName): \(describe(ea)) vs \(describe(eb))")
                }
            }
        }
        let deletedA = a.deletedZones.mapValues { "\($0.lsn)/\($0.time)" }
        let deletedB = b.deletedZones.mapValues { "\($0.lsn)/\($0.time)" }
        if deletedA != deletedB { problems.append("deleted zones differ") }
        if a.indexDefinitions != b.indexDefinitions { problems.append("secondary index definitions differ") }
        if a.catalogVersion != b.catalogVersion { problems.append("catalog version \(a.catalogVersion) vs \(b.catalogVersion)") }
        if a.segmentLive.filter({ $0.value != 0 }) != b.segmentLive.filter({ $0.value != 0 }) {
            problems.append("live-byte accounting differs")
        }
    }

    /// The newest checkpoint in `dir` that an open would use: each file newest first, damaged ones and unfinished
    /// writes reported; `decode` turns a sound file into its state, or nil (having reported why) to fall back to an
    /// older one. A payload that does not decode is reported as an error.
    func openableCheckpoint<State>(
        in dir: String, finding: (LogFinding.Severity, String, UInt64?, String) -> Void,
        decode: (CheckpointStore.CheckpointFile) throws -> State?
    ) throws -> (value: State, lsn: UInt64, path: String)? {
        var found: (value: State, lsn: UInt64, path: String)?
        let (files, temporary) = try CheckpointStore(directory: dir, fileSystem: fileSystem).list()
        for t in temporary { finding(.warning, t, nil, "an unfinished checkpoint write (the next checkpoint deletes it)") }
        for f in files {
            if let problem = f.problem {
                finding(.error, f.path, nil, "damaged checkpoint: \(problem)\(found == nil ? "; an older one (or a full replay) is used instead" : "")")
                continue
            }
            guard found == nil else { continue }
            do {
                if let value = try decode(f) { found = (value, f.lsn, f.path) }
            } catch let e as CloudletError {
                finding(.error, f.path, nil, "checkpoint payload does not decode: \(e.message)")
            }
        }
        return found
    }
}
