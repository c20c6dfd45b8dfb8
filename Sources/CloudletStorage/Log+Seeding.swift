import CloudletCore

/// The files of a log as of one moment, held open so that another node can copy them while this one goes on
/// (docs/replication.md, "Seeding a node from files"): the segments that make up the log, each up to the bytes that
/// were durable then (a frame boundary: the log's sizes only move at a group commit's fsync), and the compaction
/// marker and horizon in force then, as bytes. A compaction or a truncation that deletes a segment afterwards does
/// not take it from the snapshot: its descriptor stays open until ``close()``.
public final class LogSnapshot: Sendable {
    public let partition: UInt32
    /// The segments, each up to its durable size then.
    public let segments: [HeldFile]
    /// The log's durable end at the moment: the last LSN of the copy.
    public let durableLSN: UInt64
    /// The compaction generation in force (0: never compacted); an index flushed under another one is not used.
    public let generation: UInt32
    /// The `COMPACTED` file's bytes for the marker in force (nil: never compacted).
    public let marker: [UInt8]?
    /// The `HORIZON` file's bytes: the compaction horizon (nil: none, an unreplicated log or one never raised).
    public let horizon: [UInt8]?

    init(partition: UInt32, segments: [HeldFile], durableLSN: UInt64, generation: UInt32, marker: [UInt8]?, horizon: [UInt8]?) {
        self.partition = partition
        self.segments = segments
        self.durableLSN = durableLSN
        self.generation = generation
        self.marker = marker
        self.horizon = horizon
    }

    /// Closes the segments' descriptors (deleted files go then).
    public func close() {
        for s in segments { s.close() }
    }
}

/// A file held open for a seed (``LogSnapshot``, ``IndexSnapshot``): its name in its directory and how many of its
/// bytes to copy. Deleting its name does not take its bytes while it is held.
public struct HeldFile: Sendable {
    public var name: String
    public var size: UInt64
    let file: any File

    /// Opens `path` for reading; `size` nil: the whole file as it is now.
    static func open(_ path: String, size: UInt64?, fileSystem: any FileSystem) throws(FileSystemError) -> HeldFile {
        let file = try fileSystem.open(path, options: .readOnly)
        do throws(FileSystemError) {
            let length: UInt64
            if let size { length = size } else { length = try file.size() }
            return HeldFile(name: Path.name(path), size: length, file: file)
        } catch {
            try? file.close()
            throw error
        }
    }

    /// Opens every one of `files` (a path and the bytes to copy, nil: the whole file), or none: on a failure the ones
    /// opened already are closed again.
    static func openAll(_ files: [(path: String, size: UInt64?)], fileSystem: any FileSystem) throws(FileSystemError) -> [HeldFile] {
        var held: [HeldFile] = []
        do throws(FileSystemError) {
            for f in files { held.append(try open(f.path, size: f.size, fileSystem: fileSystem)) }
        } catch {
            for h in held { h.close() }
            throw error
        }
        return held
    }

    /// Up to `count` bytes from `offset`, never past ``size``. Throws `.io`, also when the file is shorter than that.
    public func read(offset: UInt64, count: Int) throws -> [UInt8] {
        guard offset < size else { return [] }
        let n = Int(min(UInt64(count), size - offset))
        let bytes: [UInt8]
        do throws(FileSystemError) { bytes = try file.read(at: offset, count: n) } catch {
            throw CloudletError.io(error, "reading \(name) for a seed")
        }
        guard bytes.count == n else { throw CloudletError(.io, "\(name) is shorter than the \(size) bytes it had") }
        return bytes
    }

    public func close() { try? file.close() }
}

extension Log {
    /// The log's files as of now (``LogSnapshot``): under the log's lock, so that no compaction is installed and no
    /// group commit is published in between. Only durable bytes are in it. Throws `.io` when a file cannot be opened.
    public func snapshotForSeeding() throws -> LogSnapshot {
        try monitor.withLock { s throws -> LogSnapshot in
            if let failure = s.failure { throw failure }
            let taken: [HeldFile]
            do throws(FileSystemError) {
                // A segment the committer created for frames not yet durable is left out: the copy ends at a
                // frame boundary at the durable end, and the segments before it stay contiguous.
                let durable = s.segments.filter { $0.firstLSN <= s.durableLSN }
                taken = try HeldFile.openAll(durable.map { ($0.path, $0.size) }, fileSystem: fileSystem)
            } catch {
                throw CloudletError.io(error, "opening the segments of partition \(partition) for a seed")
            }
            var horizon: UInt64?
            if s.compactionLimit != .max && s.compactionLimit > 0 { horizon = min(s.compactionLimit, s.durableLSN) }
            if let m = s.marker { horizon = max(horizon ?? 0, m.coveredThrough) }
            return LogSnapshot(
                partition: partition, segments: taken, durableLSN: s.durableLSN, generation: s.marker?.generation ?? 0,
                marker: s.marker?.encoded(),
                horizon: horizon.map { CompactionHorizon.encoded($0) })
        }
    }
}
