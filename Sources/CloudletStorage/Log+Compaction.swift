import CloudletCore
import Synchronization

extension Log {
    /// Ends the segment being written (if it holds a frame): the next frame goes to a new segment, which exists
    /// (header written and synced) when this returns. Lets a compaction take in everything written so far.
    public func roll() throws {
        if configuration.readOnly {
            throw CloudletError(.readOnly, "the log of partition \(partition) in \(directory) is open read-only")
        }
        let target = try monitor.withLock { s throws -> UInt64? in
            if let failure = s.failure { throw failure }
            if s.closing { throw CloudletError(.readOnly, "the log of partition \(partition) in \(directory) is closed") }
            guard s.stagingSegmentHasFrames else { return nil }
            let first = s.lastLSN + 1
            s.stagingSegment = first
            s.stagingOffset = UInt64(SegmentHeader.size)
            s.stagingSegmentHasFrames = false
            // An empty run that creates the segment: the committer seals the current one and creates this one.
            s.chunks.append(
                LogState.Chunk(
                    segment: first, fileOffset: UInt64(SegmentHeader.size), start: s.pending.count, count: 0,
                    createsSegment: true, lastLSN: s.lastLSN, epoch: s.epoch))
            return first
        }
        guard let target else { return }
        monitor.signal(.work)
        try monitor.withLock(
            waitingOn: .progress,
            until: { s in s.failure != nil || s.closed || s.segmentIndex(target) != nil }
        ) { s in
            if let failure = s.failure { throw failure }
            if s.segmentIndex(target) == nil {
                throw CloudletError(.readOnly, "the log of partition \(partition) in \(directory) closed while rolling")
            }
        }
    }

    /// The highest LSN a compaction may take in (``LogConfiguration/boundedCompaction``); `.max` without a limit.
    public var compactionLimit: UInt64 { monitor.withLock { $0.compactionLimit } }

    /// Raises ``compactionLimit`` to `lsn` (never lowers it); with `persist`, also stores it in the directory's
    /// ``CompactionHorizon`` file if it grew since it was last stored. Throws `.io` for a failed write (the limit
    /// in memory is raised anyway).
    public func raiseCompactionLimit(to lsn: UInt64, persist: Bool) throws {
        let bounded = monitor.withLock { s -> Bool in
            guard s.compactionLimit != .max, !s.closing else { return false }
            s.compactionLimit = max(s.compactionLimit, lsn)
            return true
        }
        guard bounded, persist, !configuration.readOnly else { return }
        _ = try storeCompactionLimit()
    }

    /// Stores the compaction limit as it is now in the `HORIZON` file if it grew; returns the value stored, which a
    /// compaction goes by (the limit in memory may grow meanwhile).
    private func storeCompactionLimit() throws -> UInt64 {
        try storedCompactionLimit.withLock { stored throws -> UInt64 in
            // The limit as it is now (another thread may have raised it meanwhile), and never below what the file
            // holds (another instance of this log, before a restart, may have stored more).
            let limit = monitor.withLock { s in s.closing ? 0 : s.compactionLimit }
            stored = max(stored, try CompactionHorizon.load(directory: directory, fileSystem: fileSystem))
            guard limit > stored, !configuration.readOnly else { return stored }
            try CompactionHorizon.write(limit, directory: directory, fileSystem: fileSystem)
            stored = limit
            return stored
        }
    }

    /// Starts a compaction of every sealed segment (a prefix of the log: earlier compacted segments included) that
    /// ends at or below ``compactionLimit`` — with a limit, only if that takes in a segment not compacted yet, and
    /// only up to the limit as stored first — or returns nil when there is none. Only one compaction runs at a
    /// time: throws `.invalidArguments` if one is under way. Finish with ``installCompaction(_:)`` or
    /// ``abandonCompaction(_:)``.
    public func beginCompaction() throws -> CompactionWriter? {
        if configuration.readOnly {
            throw CloudletError(.readOnly, "the log of partition \(partition) in \(directory) is open read-only")
        }
        // A bounded log stores its limit first and goes by what it stored, so that no compacted prefix ever ends past
        // the stored horizon.
        let bound = compactionLimit == .max ? UInt64.max : try storeCompactionLimit()
        // Leftovers of a compaction that failed in this process may hold higher generations than the state knows.
        let onDisk = try LogLayout.load(directory: directory, fileSystem: fileSystem).highestGeneration
        return try monitor.withLock { s throws -> CompactionWriter? in
            if let failure = s.failure { throw failure }
            if s.closing { throw CloudletError(.readOnly, "the log of partition \(partition) in \(directory) is closed") }
            if s.compacting { throw CloudletError.invalid("a compaction of partition \(partition) is already running") }
            let sealed = s.segments.prefix { $0.sealed && $0.lastLSN <= min(s.compactionLimit, bound) }
            guard !sealed.isEmpty, bound == .max || sealed.contains(where: { $0.generation == nil }) else {
                return nil
            }
            s.compacting = true
            let generation = max(s.highestGeneration, onDisk) + 1
            s.highestGeneration = generation
            let inputs = sealed.map {
                SegmentInfo(
                    path: $0.path, firstLSN: $0.firstLSN, lastLSN: $0.lastLSN, size: $0.size, sealed: true,
                    generation: $0.generation)
            }
            return CompactionWriter(
                directory: directory, partition: partition, generation: generation, inputs: inputs,
                segmentSize: configuration.segmentSize, compressionThreshold: configuration.compressionThreshold,
                epoch: configuration.epoch, previous: s.marker, fileSystem: fileSystem)
        }
    }

    /// Makes a finished compaction take effect: ``writeCompactionMarker(_:)``, ``swapInCompaction(_:)``, then
    /// ``removeSegmentFiles(_:)``. Returns the replaced (deleted) files. A failure to remove them is thrown after the
    /// compaction took effect.
    @discardableResult
    public func installCompaction(_ writer: CompactionWriter) throws -> [String] {
        try writeCompactionMarker(writer)
        let replaced = swapInCompaction(writer)
        try removeSegmentFiles(replaced)
        return replaced
    }

    /// The commit point of a compaction: writes the marker naming the writer's generation. From here on a crash
    /// recovers the compacted log; until ``swapInCompaction(_:)`` this process keeps reading the old segments,
    /// which still exist.
    ///
    /// If writing the marker fails before its rename, nothing changed and the compaction is abandoned. If the
    /// rename happened but the directory fsync failed, the log fails (read-only): a crash could go either way.
    public func writeCompactionMarker(_ writer: CompactionWriter) throws {
        precondition(!writer.segments.isEmpty, "writeCompactionMarker before finish")
        let marker = writer.marker
        let valid = monitor.withLock { s in
            s.compacting && s.failure == nil && !s.closing
                && s.segments.contains { $0.firstLSN == marker.coveredThrough + 1 }
                && s.segments.prefix { $0.firstLSN <= marker.coveredThrough }.map(\.path) == writer.inputs.map(\.path)
        }
        guard valid else {
            abandonCompaction(writer)
            throw CloudletError(
                .internalError,
                "the compaction of partition \(partition) no longer matches the log (closed, failed, or its segments changed)")
        }
        do throws(CompactionMarker.MarkerWriteError) {
            try marker.write(directory: directory, fileSystem: fileSystem)
        } catch {
            let failure = CloudletError.io(error.error, "writing the compaction marker of \(directory)")
            if error.durabilityUnknown {
                let handler = monitor.withLock { s in
                    s.fail(CloudletError(.readOnly, "partition \(partition) is read-only: \(failure.message)", cause: error.error))
                }
                monitor.broadcast(.progress)
                handler?(monitor.withLock { $0.failure! })
            } else {
                abandonCompaction(writer)
            }
            throw failure
        }
    }

    /// Swaps the compacted segments in for the ones they replace (in memory only; call after
    /// ``writeCompactionMarker(_:)``). Readers that took a position in a replaced segment before the swap keep
    /// reading the old file (still open) or fail with `.invalidArguments`/`.corruption` and must look their position
    /// up again. Returns the replaced files, for ``removeSegmentFiles(_:)``.
    public func swapInCompaction(_ writer: CompactionWriter) -> [String] {
        let marker = writer.marker
        return monitor.withLock { s -> [String] in
            let old = s.segments.prefix { $0.firstLSN <= marker.coveredThrough }
            // Readers holding a replaced file finish with it; the descriptor closes with its last reference.
            for o in old {
                s.files[o.firstLSN] = nil
                s.mappings[o.firstLSN] = nil
                s.unmappable.remove(o.firstLSN)
            }
            let new = writer.segments.map {
                LogState.Segment(
                    firstLSN: $0.firstLSN, lastLSN: $0.lastLSN, size: $0.size, sealed: true, path: $0.path,
                    generation: $0.generation)
            }
            s.segments.replaceSubrange(0..<old.count, with: new)
            s.marker = marker
            s.compacting = false
            s.stats.compactions += 1
            return old.map(\.path)
        }
    }

    /// Deletes segment files a compaction replaced, every one it can. Failing to leaves files that the next open
    /// removes (the marker says they are replaced), so a failure loses nothing; it is thrown (`.io`, naming the
    /// first failed call and how many failed) for the caller to report.
    public func removeSegmentFiles(_ paths: [String]) throws {
        guard !paths.isEmpty else { return }
        var failures: [FileSystemError] = []
        for path in paths {
            do throws(FileSystemError) { try fileSystem.remove(path) } catch { failures.append(error) }
        }
        do throws(FileSystemError) { try fileSystem.fsyncDirectory(directory) } catch { failures.append(error) }
        if let first = failures.first {
            throw CloudletError.io(
                first, "removing the \(paths.count) segment file(s) a compaction replaced in \(directory) (\(failures.count) call(s) failed; the next open removes what is left)")
        }
    }

    /// Gives up a compaction: deletes what it wrote and lets another one start.
    public func abandonCompaction(_ writer: CompactionWriter) {
        writer.abandon()
        monitor.withLock { $0.compacting = false }
    }
}
