import Cloudlet
import CloudletCore
import CloudletStorage

/// A partition's index (`p*/index`, store format 4): the LSM tree of its key directory, as `info`, `stats` and
/// `verify` describe it — its live runs from the manifest, and the state flushed with them.
package struct IndexSummary: Sendable {
    /// The index directory.
    package var directory: String
    /// The live manifest's file name (nil: `CURRENT` is missing or names none).
    package var manifest: String?
    /// Live runs and their bytes per level (index = level), from the manifest.
    package var runsPerLevel: [Int] = []
    package var bytesPerLevel: [UInt64] = []
    /// From the log position recorded with the last flush: the LSN the flushed state covers (replay starts after
    /// it) and the compaction generation its positions refer to. Nil: never flushed, or unreadable.
    package var flushedLSN: UInt64?
    package var generation: UInt32?
    /// Key directory entries of the flushed state (its zone summaries): records that exist, and tombstones.
    package var records: Int?
    package var tombstones: Int?
    /// Why opening does not read its state (damaged, never flushed, flushed under another compaction generation).
    package var problem: String?
    /// Files the next read-write open deletes (names): runs no longer live (merged away while a reader still held
    /// them, or written by a flush that never reached the manifest), run temp files, older manifests. Legal, so
    /// not findings.
    package var leftovers: [String] = []

    package var runs: Int { runsPerLevel.reduce(0, +) }
    package var bytes: UInt64 { bytesPerLevel.reduce(0, +) }
}

/// A finding's severity, file, offset in it and message (the shape `verify` reports).
typealias FindingSink = (LogFinding.Severity, String, UInt64?, String) -> Void

/// A partition's index opened read-only (``StoreInspector/openIndex(_:generation:finding:)``).
struct OpenedIndex {
    var summary: IndexSummary
    /// The tree, when it opened; the caller closes it.
    var tree: LSMTree?
    /// The live manifest's path (or, without one, `CURRENT`'s): where the flush's log position is recorded.
    var manifestPath: String
    /// The paths of the files in the index directory, longest first (see ``StoreInspector/file(naming:among:)``).
    var files: [String] = []
    /// The flushed state and where replay starts after it, when an open would use them: the state decodes and
    /// was flushed under the log's compaction generation.
    var flushed: (state: PartitionState, lsn: UInt64, next: FramePosition?)?
}

extension StoreInspector {
    /// What rebuilds a damaged index, for the findings that name one.
    static let indexRebuildHint = "a read-write open (or `cloudlet-tool repair`) sets the index aside and rebuilds it from the log"

    /// Opens the index of the partition in `dir` read-only (nothing is written, nothing merged), as an open would:
    /// `CURRENT`, the manifest, every live run, the log position and the flushed state. Everything wrong is
    /// reported to `finding` (errors for damage, naming the file; warnings for what the next open cleans up or
    /// rebuilds) and in the summary's ``IndexSummary/problem``. `generation`: the log's compaction generation. Nil
    /// when the partition has no index (a store of format 3, or an index directory never written to).
    func openIndex(_ dir: String, generation: UInt32, finding: FindingSink) -> OpenedIndex? {
        let path = Partition.indexDirectory(dir)
        guard fileSystem.fileExists(path) else { return nil }
        let current = Path.join(path, "CURRENT")
        var opened = OpenedIndex(summary: IndexSummary(directory: path), manifestPath: current)
        func damaged(_ file: String, _ offset: UInt64?, _ message: String) {
            opened.summary.problem = opened.summary.problem ?? message
            finding(.error, file, offset, "\(message); \(Self.indexRebuildHint)")
        }
        let names: [String]
        do throws(FileSystemError) { names = try fileSystem.listDirectory(path) } catch {
            damaged(path, nil, "the index directory cannot be listed: \(error)")
            return opened
        }
        guard names.contains("CURRENT") else {
            guard !names.isEmpty else { return nil }
            damaged(current, nil, "the index has no CURRENT file but holds \(names.count) file(s): it cannot be read")
            return opened
        }
        // Longest first: a message naming `CURRENT.tmp` names `CURRENT` too.
        let files = names.map { Path.join(path, $0) }.sorted { $0.count > $1.count }
        opened.files = files
        // The manifest on its own first: the runs it lists (even when one of them does not open) and a torn edit.
        var readOnly = Manifest.Configuration()
        readOnly.readOnly = true
        let manifest: Manifest
        do { manifest = try Manifest(directory: path, fileSystem: fileSystem, configuration: readOnly) } catch {
            damaged(blame(error, files, or: path), nil, "the index's manifest does not open: \(Self.message(error))")
            return opened
        }
        let version = manifest.current
        let manifestPath = manifest.openReport.manifest ?? current
        manifest.close()
        opened.manifestPath = manifestPath
        opened.summary.manifest = Path.name(manifestPath)
        if let torn = manifest.openReport.tornTail {
            finding(.warning, manifestPath, nil, "a torn last edit (\(torn)) is ignored; the next read-write open rewrites the manifest")
        }
        let levels = (version.runs.map(\.level).max() ?? -1) + 1
        opened.summary.runsPerLevel = (0..<levels).map { l in version.runs(atLevel: l).count }
        opened.summary.bytesPerLevel = (0..<levels).map { l in version.runs(atLevel: l).reduce(0) { $0 + $1.fileSize } }
        opened.summary.leftovers = names.sorted().filter { Self.isIndexLeftover($0, live: version, manifest: Path.name(manifestPath)) }

        var config = LSMTreeConfiguration()
        config.manifest.readOnly = true
        config.backgroundMerges = false
        config.blockCacheCapacity = 1 << 20
        let tree: LSMTree
        do {
            tree = try LSMTree(directory: path, fileSystem: fileSystem, configuration: config)
            do { try tree.openRuns() } catch {
                tree.close()
                throw error
            }
        } catch {
            damaged(blame(error, files, or: manifestPath), nil, "the index does not open: \(Self.message(error))")
            return opened
        }
        opened.tree = tree
        let logPosition = tree.logPosition
        guard !logPosition.isEmpty else {
            opened.summary.problem = "never flushed: opening replays the log"
            finding(.warning, manifestPath, nil, "the index was never flushed; the next open replays the log and flushes it")
            return opened
        }
        let position: Partition.FlushPosition
        do { position = try Partition.FlushPosition(decoding: logPosition) } catch {
            damaged(manifestPath, nil, "the log position of the index's last flush does not decode: \(Self.message(error))")
            return opened
        }
        opened.summary.flushedLSN = position.lastLSN
        opened.summary.generation = position.generation
        let state: PartitionState
        do {
            let base = tree.runsView()
            guard let bytes = try base.get(DirectoryKey.state) else {
                damaged(path, nil, "the index holds no flushed state (key 0x03)")
                return opened
            }
            state = try PartitionState.decodeState(bytes, base: base)
        } catch {
            damaged(blame(error, files, or: path), nil, "the state flushed with the index does not decode: \(Self.message(error))")
            return opened
        }
        let summaries = state.keys.zoneKeys.compactMap { state.zone($0) }
        opened.summary.records = summaries.reduce(0) { $0 + $1.liveCount }
        opened.summary.tombstones = summaries.reduce(0) { $0 + $1.entryCount - $1.liveCount }
        guard state.lastLSN == position.lastLSN else {
            damaged(manifestPath, nil, "the flushed state is at LSN \(state.lastLSN) but the manifest says LSN \(position.lastLSN)")
            return opened
        }
        guard position.generation == generation else {
            opened.summary.problem = "flushed under compaction generation \(position.generation), the log is at \(generation)"
            finding(
                .warning, manifestPath, nil,
                "the index was flushed under compaction generation \(position.generation), the log is at \(generation): the next open rebuilds the index from the log")
            return opened
        }
        opened.flushed = (state, position.lastLSN, position.next)
        return opened
    }

    /// The index of the partition in `dir` described for `info` and `stats`: ``openIndex(_:generation:finding:)``
    /// with what is wrong only in the summary's ``IndexSummary/problem``; `usable`: whether an open reads its
    /// flushed state. Nil when the partition has no index.
    func indexSummary(_ dir: String, generation: UInt32) -> (summary: IndexSummary, usable: Bool)? {
        guard let index = openIndex(dir, generation: generation, finding: { _, _, _, _ in }) else { return nil }
        index.tree?.close()
        return (index.summary, index.flushed != nil)
    }

    /// Whether `name` in an index directory is something a read-write open deletes: a run the live version does not
    /// list, a run being written, a manifest other than the live one (SortedRunFormat.md, "Directory").
    private static func isIndexLeftover(_ name: String, live: LSMVersion, manifest: String) -> Bool {
        if let number = SortedRunFile.number(fileName: name) { return !live.runs.contains { $0.fileNumber == number } }
        if name.hasSuffix(SortedRunFile.suffix + FileReplacement.temporarySuffix) { return true }
        return name.hasPrefix("MANIFEST-") && name != manifest
    }

    /// The first of `files` that `error` names, else `fallback`.
    private func blame(_ error: any Error, _ files: [String], or fallback: String) -> String {
        Self.file(naming: error, among: files) ?? fallback
    }

    /// The first of `files` that `error`'s message names.
    static func file(naming error: any Error, among files: [String]) -> String? {
        let text = message(error)
        return files.first { text.contains($0) }
    }

    static func message(_ error: any Error) -> String { (error as? CloudletError)?.message ?? "\(error)" }
}
