import CloudletCore
import CloudletStorage
import Foundation

/// A follower's side of the partition: frames a leader wrote, appended verbatim and applied through the same path
/// as the leader's own commits, so that records, the key directory, indexes and change feeds follow from the log on
/// every replica.
extension Partition {
    /// Frames a leader sent, with their commits decoded ahead of the append (``decodeFollowed(_:partition:)``): a
    /// follower needs the assets they reference before it appends them, and the append then applies the commits
    /// decoded here instead of decoding each frame again.
    package struct FollowedFrames: Sendable {
        /// Whole frames as the leader stored them (``Log/frames(from:maxBytes:)``), checked and decoded once.
        package let checked: Log.CheckedFrames
        package var bytes: [UInt8] { checked.bytes }
        /// Each frame's decoded commit, in order; nil for a frame that is not a readable commit (the append then
        /// decodes it again and fails as it always did).
        let commits: [(commit: Commit, slots: [Int: Commit.Slot], sizes: [UInt32])?]
        /// The assets the records these frames put reference (list fields included), each checksum once: what a
        /// follower must hold before it appends them (docs/replication.md, "Assets").
        package let assets: [AssetReference]
    }

    /// Checks and decodes `bytes` (whole frames) for ``appendFollowed(_:leaderEpoch:)``. Throws `.corruption` for
    /// frames that fail their checks (the log would refuse them too).
    package static func decodeFollowed(_ bytes: [UInt8], partition: UInt32) throws -> FollowedFrames {
        var seen: Set<String> = []
        var assets: [AssetReference] = []
        let checked = try Log.checkVerbatim(bytes, partition: partition)
        let commits = checked.frames.map { frame in
            guard frame.type == Commit.frameType, let decoded = try? Commit.decode(frame.payload) else { return nil }
            for case .putRecord(_, let record, _) in decoded.commit.mutations {
                for value in record.fields.values {
                    for asset in value.assets where seen.insert(asset.fileChecksum).inserted { assets.append(asset) }
                }
            }
            return decoded
        } as [(commit: Commit, slots: [Int: Commit.Slot], sizes: [UInt32])?]
        return FollowedFrames(checked: checked, commits: commits, assets: assets)
    }

    /// ``appendFollowed(_:leaderEpoch:)-(FollowedFrames,_)`` of frames not decoded yet.
    package func appendFollowed(_ bytes: [UInt8], leaderEpoch: UInt64) throws -> UInt64 {
        try appendFollowed(
            FollowedFrames(checked: try Log.checkVerbatim(bytes, partition: id), commits: [], assets: []), leaderEpoch: leaderEpoch)
    }

    /// Appends `followed` — whole frames as the leader stored them — verbatim
    /// (``Log/appendVerbatimFrames(_:leaderEpoch:)``: checked, all or nothing, fenced by `leaderEpoch`) and applies
    /// each, as a job of the partition's writer. Returns the last LSN appended; wait for its durability with
    /// ``Log/waitDurable(_:)``. Blocking.
    ///
    /// Throws what the log refuses (`.corruption`, `.invalidArguments` for a gap, `.serviceUnavailable` when fenced)
    /// with nothing appended; a frame that is not a commit is `.corruption` too. A frame the state cannot take after
    /// it was appended fails the log (`readOnly`, as for a leader's own commits): reopening replays it.
    package func appendFollowed(_ followed: FollowedFrames, leaderEpoch: UInt64) throws -> UInt64 {
        let (last, written, memtableFull) = try writer.runBlocking {
            try state.withLock { st -> (UInt64, Int, Bool) in
                let frames = try log.appendVerbatimFrames(followed.checked, leaderEpoch: leaderEpoch)
                var written = 0
                var memtableFull = false
                for (i, frame) in frames.enumerated() {
                    let decoded: (commit: Commit, slots: [Int: Commit.Slot], sizes: [UInt32])
                    do {
                        guard frame.type == Commit.frameType else {
                            throw CloudletError.corruption(
                                "partition \(id): followed frame LSN \(frame.lsn) has unknown type \(frame.type)")
                        }
                        if i < followed.commits.count, let ready = followed.commits[i] { decoded = ready } else {
                            decoded = try Commit.decode(frame.payload)
                        }
                    } catch {
                        // Appended but not applicable: nothing more may go on top of it.
                        log.fail(CloudletError(.readOnly, "partition \(id): followed frame \(frame.lsn): \(error)", cause: error))
                        throw error
                    }
                    let (commit, slots, sizes) = decoded
                    let (length, full) = try apply(commit, slots: slots, sizes: sizes, lookups: nil, to: &st, lsn: frame.lsn) {
                        frame.position
                    }
                    written += length
                    memtableFull = memtableFull || full
                }
                return (frames.last?.lsn ?? st.lastLSN, written, memtableFull)
            }
        }
        if written > 0 { noteCommitted(bytes: written, memtableFull: memtableFull) }
        return last
    }

    /// Waits until the followed frames up to `lsn` are durable here, then hands them to this store's change
    /// listeners (``CloudletStore/committedChanges(bufferSize:)``: the notification hub, the console's change view),
    /// as ``waitDurable(_:)`` does for a leader's own commits — without it a follower's listeners would hear nothing
    /// and its staged changes would pile up. Blocking.
    package func waitFollowedDurable(_ lsn: UInt64) throws {
        try log.waitDurableBlocking(lsn)
        if publisher.isActive { publisher.publish(durable: log.durableLSN) }
    }
}

extension CloudletStore {
    /// ``truncatePartition(at:partition:after:)`` for the catalog's log (its checkpoints go too).
    package static func truncateCatalog(at path: String, after lsn: UInt64) throws -> LogTruncation {
        let directory = path + "/" + Catalog.directoryName
        let truncation = try Log.truncate(directory: directory, partition: Catalog.logPartition, after: lsn)
        let fm = FileManager.default
        for name in (try? fm.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix("checkpoint-") {
            try fm.removeItem(atPath: directory + "/" + name)
        }
        return truncation
    }

    /// Removes the frames after `lsn` from partition `partition` of the closed store at `path` — a deposed leader's
    /// divergent suffix (``Log/truncate(directory:partition:after:fileSystem:)``) — and the derived state that may
    /// cover them (the key directory's flushed runs and the checkpoints), so that the next open rebuilds it from the
    /// log. Blocking; the store must not be open.
    package static func truncatePartition(at path: String, partition: Int, after lsn: UInt64) throws -> LogTruncation {
        let directory = path + "/" + StoreMetadata.partitionDirectoryName(partition)
        let truncation = try Log.truncate(directory: directory, partition: UInt32(partition), after: lsn)
        let fm = FileManager.default
        for name in (try? fm.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix("checkpoint-") {
            try fm.removeItem(atPath: directory + "/" + name)
        }
        let index = Partition.indexDirectory(directory)
        if fm.fileExists(atPath: index) { try fm.removeItem(atPath: index) }
        return truncation
    }
}
