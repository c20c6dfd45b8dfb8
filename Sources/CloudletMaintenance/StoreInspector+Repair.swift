import Cloudlet
import CloudletCore
import CloudletStorage

/// What `cloudlet-tool repair` did, or would do.
package struct RepairReport: Sendable {
    /// What was (or would be) done, in order.
    package var actions: [String] = []
    /// Problems repair will not fix without being told how: mid-log corruption and lost segments (pass a drop range
    /// for each), a damaged compaction marker. Nothing was changed when this is not empty.
    package var refused: [VerifyReport.Finding] = []
    /// For each refused finding that a drop range would fix, the `--drop-range` argument.
    package var suggestions: [String] = []
    /// Where the files it changed or removed were saved.
    package var backupDirectory: String?
    /// The store's check before and after.
    package var before: VerifyReport
    package var after: VerifyReport?
}

/// A `--drop-range`: partition and range.
package struct DropRange: Sendable, Hashable {
    package var partition: Int
    package var drop: LogRepair.Drop
    package init(partition: Int, drop: LogRepair.Drop) {
        self.partition = partition
        self.drop = drop
    }
}

extension StoreInspector {
    /// Repairs the store: drops the named ranges (mid-log corruption, lost segments), truncates a torn tail, removes
    /// leftovers of interrupted compactions and checkpoint writes, and rebuilds the derived state from the log
    /// (its checkpoints are set aside and a full replay writes a new one). Everything changed or removed is first
    /// saved under `backupDirectory` (`p0000/…`): replaced segments are moved there, a segment with a torn tail is
    /// copied. Refuses — changing nothing — when the log has damage no drop range covers. `lock` is the store's
    /// exclusive lock, held by the caller on the inspector's file system; it is released when this returns.
    package func repair(
        drops: [DropRange], backupDirectory: String, lock: StoreLock, dryRun: Bool, rebuild: Bool,
        progress: ProgressHandler? = nil
    ) async throws -> RepairReport {
        defer { lock.release() }
        let before = try verify(deep: false, progress: progress)
        var report = RepairReport(before: before)
        var perPartition: [Int: (drops: [LogRepair.Drop], torn: [String], work: Bool)] = [:]
        for d in drops { perPartition[d.partition, default: ([], [], true)].drops.append(d.drop) }
        func name(_ path: String) -> String { String(path.split(separator: "/").last ?? "") }
        for f in before.findings {
            let file = name(f.file)
            let isSegment = file.hasSuffix(".seg")
            var entry = perPartition[f.partition, default: ([], [], false)]
            defer { perPartition[f.partition] = entry }
            if f.severity == .warning {
                entry.work = true
                if f.message.hasPrefix("torn tail") || f.message.contains("a crash while creating the segment") {
                    entry.torn.append(f.file)
                    report.actions.append("partition \(f.partition): cut the torn tail of \(file) at offset \(f.offset ?? 0)")
                } else if isSegment || file == CompactionMarker.fileName + FileReplacement.temporarySuffix {
                    report.actions.append("partition \(f.partition): set aside \(file), left by an interrupted compaction")
                }
                continue
            }
            if isSegment {
                let covered = entry.drops.contains { d in
                    d.segment == file && (f.offset.map { d.start <= $0 && $0 < max(d.end, d.start + 1) } ?? true)
                        || f.message.contains("lost in the damaged end of \(d.segment)")
                        || f.message.contains("segment file \(d.segment) was deleted")
                }
                if covered { continue }
                report.refused.append(f)
                if let damaged = f.damaged {
                    report.suggestions.append("--drop-range \(f.partition == 0 ? "" : "p\(f.partition)/")\(file):\(damaged.lowerBound)-\(damaged.upperBound)")
                } else if f.message.contains("was deleted or lost") {
                    report.suggestions.append("--drop-range \(f.partition == 0 ? "" : "p\(f.partition)/")\(file):0-0")
                }
                continue
            }
            if file == CompactionMarker.fileName {
                report.refused.append(f)
                continue
            }
            // The index (and a format-3 store's checkpoints): derived state, rebuilt from the log.
            entry.work = true
        }
        guard report.refused.isEmpty else { return report }
        for (p, entry) in perPartition.sorted(by: { $0.key < $1.key }) {
            for d in entry.drops { report.actions.append("partition \(p): drop \(d) and every frame in it") }
            if entry.work || rebuild { report.actions.append("partition \(p): set the index and checkpoints aside and rebuild the derived state from the log") }
        }
        if !rebuild && !perPartition.values.contains(where: { $0.work || !$0.drops.isEmpty }) {
            report.actions = []
            return report
        }
        report.backupDirectory = backupDirectory
        if dryRun { return report }

        let fs = fileSystem
        func backup(_ p: Int) throws -> String {
            let dir = backupDirectory + "/" + StoreMetadata.partitionDirectoryName(p)
            try io { () throws(FileSystemError) in try fs.createDirectory(dir) }
            return dir
        }
        for p in 0..<partitionCount {
            let entry = perPartition[p]
            guard entry != nil || rebuild else { continue }
            let dir = partitionDirectory(p)
            let saved = try backup(p)
            if let drops = entry?.drops, !drops.isEmpty {
                let outcome = try LogRepair.apply(
                    drops, directory: dir, partition: UInt32(p), backupDirectory: saved, fileSystem: fs)
                let lost = outcome.lost.map { $0.lowerBound == $0.upperBound ? "\($0.lowerBound)" : "\($0.lowerBound)…\($0.upperBound)" }
                report.actions.append(
                    "partition \(p): dropped \(outcome.droppedBytes) bytes; LSNs \(lost.isEmpty ? "none" : lost.joined(separator: ", ")) lost; the log through LSN \(outcome.marker.coveredThrough) is now generation \(outcome.marker.generation)")
            }
            for path in entry?.torn ?? [] where fs.fileExists(path) {
                try io { () throws(FileSystemError) in try fs.copyFile(path, to: saved + "/" + name(path)) }
            }
            let (checkpoints, temporary) = try CheckpointStore(directory: dir, fileSystem: fs).list()
            let layout = try LogLayout.load(directory: dir, fileSystem: fs)
            let index = Partition.indexDirectory(dir)
            for path in checkpoints.map(\.path) + temporary + layout.leftovers + (fs.fileExists(index) ? [index] : []) {
                try io { () throws(FileSystemError) in try fs.rename(path, to: saved + "/" + name(path)) }
            }
            try io { () throws(FileSystemError) in
                try fs.fsyncDirectory(saved)
                try fs.fsyncDirectory(dir)
            }
        }
        // A read-write open truncates torn tails, replays everything and writes each partition's index anew.
        var config = StoreConfiguration()
        config.compaction = .manual
        let store = try CloudletStore(path: path, configuration: config, holding: lock)
        try await store.close()
        report.actions.append("rebuilt the derived state from the log and wrote a new index")
        report.after = try verify(deep: false, progress: progress)
        return report
    }
}
