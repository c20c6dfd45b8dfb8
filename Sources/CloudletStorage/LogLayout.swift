import CloudletCore

/// Which files of a log directory make up the log (LogFormat.md, "Directory"): the compaction marker selects the
/// compacted segments of its generation and the regular segments after the LSNs they cover; anything else that
/// looks like a segment is a leftover of an interrupted compaction (or of the swap after one) and is not read.
public struct LogLayout: Sendable {
    /// A segment file the log is made of.
    public struct SegmentFile: Sendable, Hashable {
        public var path: String
        /// The LSN it starts at (its id).
        public var firstLSN: UInt64
        /// The compaction generation that wrote it; nil for a regular segment.
        public var generation: UInt32?

        public var isCompacted: Bool { generation != nil }
    }

    /// The log directory.
    public var directory: String
    /// The compaction marker, if a compaction ever took effect.
    public var marker: CompactionMarker?
    /// The segments of the log, by first LSN.
    public var segments: [SegmentFile]
    /// Files that are not part of the log: compacted segments of other generations, regular segments the marker's
    /// compacted segments replace, a marker temp file. A read-write open deletes them; readers ignore them.
    public var leftovers: [String]
    /// The highest compaction generation named anywhere (marker or file names): a new compaction uses one more.
    public var highestGeneration: UInt32

    /// Lists `directory`. Throws `.io` if it cannot be listed, `.corruption` for a damaged marker or a segment
    /// named LSN 0.
    public static func load(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws -> LogLayout {
        let directory = Path.normalize(directory)
        let names: [String]
        do { names = try fileSystem.listDirectory(directory) } catch {
            throw CloudletError.io(error, "listing log directory \(directory)")
        }
        let marker = try CompactionMarker.load(directory: directory, fileSystem: fileSystem)
        var layout = LogLayout(
            directory: directory, marker: marker, segments: [], leftovers: [],
            highestGeneration: marker?.generation ?? 0)
        for name in names {
            let path = Path.join(directory, name)
            if name == CompactionMarker.tempName {
                layout.leftovers.append(path)
                continue
            }
            guard let (lsn, generation) = SegmentHeader.parse(fileName: name) else { continue }
            guard lsn > 0 else { throw CloudletError.corruption("segment \(path): LSNs start at 1, not 0") }
            if let generation { layout.highestGeneration = max(layout.highestGeneration, generation) }
            let selected: Bool
            if let marker {
                selected = generation == nil ? lsn > marker.coveredThrough : generation == marker.generation
            } else {
                selected = generation == nil
            }
            if selected {
                layout.segments.append(SegmentFile(path: path, firstLSN: lsn, generation: generation))
            } else {
                layout.leftovers.append(path)
            }
        }
        layout.segments.sort { $0.firstLSN < $1.firstLSN }
        layout.leftovers.sort()
        return layout
    }

    /// Deletes the leftovers and makes that durable (a read-write open does this before recovering).
    func removeLeftovers(fileSystem: any FileSystem) throws {
        guard !leftovers.isEmpty else { return }
        do throws(FileSystemError) {
            for path in leftovers { try fileSystem.remove(path) }
            try fileSystem.fsyncDirectory(directory)
        } catch {
            throw CloudletError.io(error, "removing leftovers of an interrupted compaction in \(directory)")
        }
    }

    /// The generation the next compaction of this log writes.
    public var nextGeneration: UInt32 { highestGeneration + 1 }

    /// What a segment file's header says, or nil if it is not a valid header.
    public struct HeaderInfo: Sendable, Hashable {
        public var partition: UInt32
        public var firstLSN: UInt64
        /// The epoch of the leader that created it.
        public var epoch: UInt64
        /// Compacted segments: the generation and the last LSN covered.
        public var generation: UInt32?
        public var coveredThrough: UInt64?
        /// The file's size.
        public var size: UInt64
    }

    /// Reads the header of the segment file at `path`.
    public static func header(of path: String, fileSystem: any FileSystem = PosixFileSystem()) -> HeaderInfo? {
        guard let file = try? fileSystem.open(path, options: .readOnly) else { return nil }
        defer { try? file.close() }
        guard let size = try? file.size(), let bytes = try? file.read(at: 0, count: SegmentHeader.size),
            case .success(let h) = SegmentHeader.parse(bytes)
        else { return nil }
        return HeaderInfo(
            partition: h.partition, firstLSN: h.firstLSN, epoch: h.epoch, generation: h.isCompacted ? h.generation : nil,
            coveredThrough: h.isCompacted ? h.coveredThrough : nil, size: size)
    }
}
