import CloudletCore

/// The files of a log as of one moment, held open so that another node can copy them while this one goes on
/// (docs/replication.md, "Seeding a node from files"): the segments that make up the log, each up to the bytes that
/// were durable then (a frame boundary: the log's sizes only move at a group commit's fsync), and the compaction
/// marker and horizon in force then, as bytes. A compaction or a truncation that deletes a segment afterwards does
/// not take it from the snapshot: its descriptor stays open until ``close()``.
public final class LogSnapshot: Sendable {
    /// A segment as the snapshot holds it: its file name in the log's directory and how many of its bytes to copy.
    public struct Segment: Sendable {
        public var name: String
        public var size: UInt64
        let file: any File
    }

    public let partition: UInt32
    public let segments: [Segment]
    /// The log's durable end at the moment: the last LSN of the copy.
    public let durableLSN: UInt64
    /// The `COMPACTED` file's bytes for the marker in force (nil: never compacted).
    public let marker: [UInt8]?
    /// The `HORIZON` file's bytes: the compaction horizon (nil: none, an unreplicated log or one never raised).
    public let horizon: [UInt8]?

    init(partition: UInt32, segments: [Segment], durableLSN: UInt64, marker: [UInt8]?, horizon: [UInt8]?) {
        self.partition = partition
        self.segments = segments
        self.durableLSN = durableLSN
        self.marker = marker
        self.horizon = horizon
    }

    /// Up to `count` bytes of segment `index` from `offset`, never past the snapshot's size of it. Throws `.io`.
    public func read(segment index: Int, offset: UInt64, count: Int) throws -> [UInt8] {
        let s = segments[index]
        guard offset < s.size else { return [] }
        let n = Int(min(UInt64(count), s.size - offset))
        let bytes: [UInt8]
        do throws(FileSystemError) { bytes = try s.file.read(at: offset, count: n) } catch {
            throw CloudletError.io(error, "reading segment \(s.name) of partition \(partition) for a seed")
        }
        guard bytes.count == n else {
            throw CloudletError(.io, "segment \(s.name) of partition \(partition) is shorter than the \(s.size) bytes it had")
        }
        return bytes
    }

    /// Closes the segments' descriptors (deleted files go then).
    public func close() {
        for s in segments { try? s.file.close() }
    }
}

extension Log {
    /// The log's files as of now (``LogSnapshot``): under the log's lock, so that no compaction is installed and no
    /// group commit is published in between. Only durable bytes are in it. Throws `.io` when a file cannot be opened.
    public func snapshotForSeeding() throws -> LogSnapshot {
        try monitor.withLock { s throws -> LogSnapshot in
            if let failure = s.failure { throw failure }
            var taken: [LogSnapshot.Segment] = []
            do throws(FileSystemError) {
                // A segment the committer created for frames not yet durable is left out: the copy ends at a
                // frame boundary at the durable end, and the segments before it stay contiguous.
                for segment in s.segments where segment.firstLSN <= s.durableLSN {
                    let file = try fileSystem.open(segment.path, options: .readOnly)
                    taken.append(LogSnapshot.Segment(name: Path.name(segment.path), size: segment.size, file: file))
                }
            } catch {
                for t in taken { try? t.file.close() }
                throw CloudletError.io(error, "opening the segments of partition \(partition) for a seed")
            }
            var horizon: UInt64?
            if s.compactionLimit != .max && s.compactionLimit > 0 { horizon = min(s.compactionLimit, s.durableLSN) }
            if let m = s.marker { horizon = max(horizon ?? 0, m.coveredThrough) }
            return LogSnapshot(
                partition: partition, segments: taken, durableLSN: s.durableLSN, marker: s.marker?.encoded(),
                horizon: horizon.map { CompactionHorizon.encoded($0) })
        }
    }
}
