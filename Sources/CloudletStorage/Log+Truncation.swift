import CloudletCore

/// What ``Log/truncate(directory:partition:after:fileSystem:)`` removed.
public struct LogTruncation: Sendable, Hashable {
    /// The log's last LSN before: frames `lsn + 1 … previousLastLSN` were removed (none when it is ≤ `lsn`).
    public var previousLastLSN: UInt64
    /// The log's last LSN now.
    public var lastLSN: UInt64
    /// Segment files deleted (they held only removed frames), newest first.
    public var removedSegments: [String]
    /// The segment cut short, and its new size; nil when the cut fell on a segment boundary.
    public var cutSegment: String?
    public var cutSize: UInt64?
}

extension Log {
    /// Removes every frame after `lsn` from the closed log in `directory`: the divergent suffix a deposed leader
    /// wrote in its old epoch, which the new leader never had (Raft's and Kafka's truncation on rejoin). The caller
    /// must also drop derived state (checkpoints) covering any LSN past `lsn`, then reopen and replay.
    ///
    /// Crash-safe at every step, and idempotent: segment files holding only removed frames are deleted newest
    /// first, the directory fsynced after each; then the segment holding frame `lsn + 1` is cut there and
    /// fdatasync'd. A crash leaves a prefix of the old log that still holds frames 1…`lsn`; running it again
    /// finishes the job. Also repairs what a read-write open does (torn tail, leftovers).
    ///
    /// Throws `.invalidArguments` when `lsn` lies in a compacted prefix (the frames to keep are no longer a prefix
    /// of files), `.corruption` for a damaged log, `.io` for a failed file operation. Reads (and decompresses) every
    /// frame of the log once.
    public static func truncate(
        directory: String, partition: UInt32, after lsn: UInt64, fileSystem: any FileSystem = PosixFileSystem()
    ) throws -> LogTruncation {
        let directory = Path.normalize(directory)
        let recovery = LogRecovery(directory: directory, fileSystem: fileSystem, partition: partition, mode: .repair, epoch: 0)
        var cut: FramePosition?
        let outcome = try recovery.run(afterLSN: 0, startHint: nil) { frame in
            if frame.lsn == lsn + 1 { cut = frame.position }
        }
        try? outcome.lastFile?.close()
        var result = LogTruncation(
            previousLastLSN: outcome.lastLSN, lastLSN: outcome.lastLSN, removedSegments: [], cutSegment: nil, cutSize: nil)
        guard outcome.lastLSN > lsn else { return result }
        if let marker = outcome.marker, marker.coveredThrough > lsn {
            throw CloudletError.invalid(
                "partition \(partition) in \(directory): cannot truncate after LSN \(lsn), compaction generation \(marker.generation) covers LSNs up to \(marker.coveredThrough)")
        }
        guard let cut else {
            preconditionFailure("recovery replayed no frame \(lsn + 1) in a log ending at \(outcome.lastLSN)")
        }
        for segment in outcome.segments.reversed() where segment.firstLSN > lsn {
            do {
                try fileSystem.remove(segment.path)
                try fileSystem.fsyncDirectory(directory)
            } catch { throw CloudletError.io(error, "removing segment \(segment.path) (truncating after LSN \(lsn))") }
            result.removedSegments.append(segment.path)
        }
        if let segment = outcome.segments.first(where: { $0.firstLSN == cut.segment }), segment.firstLSN <= lsn {
            do {
                let file = try fileSystem.open(segment.path, options: [])
                defer { try? file.close() }
                try file.truncate(to: cut.offset)
                try file.fdatasync()
            } catch { throw CloudletError.io(error, "cutting segment \(segment.path) at offset \(cut.offset)") }
            result.cutSegment = segment.path
            result.cutSize = cut.offset
        }
        result.lastLSN = lsn
        return result
    }
}
