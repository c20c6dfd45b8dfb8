import CloudletCore

/// Offline surgery on a damaged log (`cloudlet-tool repair --drop-range`): drops byte ranges an operator named
/// (corrupt frames in the middle of the log, or a lost segment file) and keeps everything else.
///
/// The log is rewritten the way compaction rewrites it — the prefix through the last damaged segment becomes
/// compacted segments of a new generation, every intact frame copied byte for byte with its LSN, so the LSNs of the
/// dropped frames become a legal gap — and the replaced files are moved to a backup directory, never deleted. No
/// ``Log`` may be open on the directory.
public enum LogRepair {
    /// A byte range of a segment file to drop: `start..<end` (`end` may be the file's size). For a missing segment
    /// file, name it as a finding did (`00000000000000000101.seg`); its range is ignored.
    public struct Drop: Sendable, Hashable, CustomStringConvertible {
        public var segment: String
        public var start: UInt64
        public var end: UInt64

        public init(segment: String, start: UInt64, end: UInt64) {
            self.segment = segment
            self.start = start
            self.end = end
        }

        public var description: String { "\(segment):\(start)-\(end)" }
    }

    public struct Outcome: Sendable {
        /// The generation written and the LSNs it covers.
        public var marker: CompactionMarker
        /// The LSN ranges whose frames are gone.
        public var lost: [ClosedRange<UInt64>]
        /// Bytes dropped.
        public var droppedBytes: UInt64
        /// Files moved to the backup directory.
        public var replaced: [String]
    }

    /// Applies `drops` to the log in `directory`. Every other byte of the rewritten segments must be intact: a bad
    /// frame outside the drops throws `.corruption` (naming it) and changes nothing.
    public static func apply(
        _ drops: [Drop], directory: String, partition: UInt32, backupDirectory: String,
        segmentSize: Int = LogConfiguration().segmentSize, fileSystem: any FileSystem = PosixFileSystem()
    ) throws -> Outcome {
        let layout = try LogLayout.load(directory: directory, fileSystem: fileSystem)
        let segments = layout.segments
        guard !segments.isEmpty else { throw CloudletError.invalid("log directory \(directory) holds no segment") }
        let names = segments.map { Path.name($0.path) }
        // How far the rewrite goes: through the last segment a drop names (or the one before a missing one).
        var through = -1
        var coveredEnd: UInt64?
        var missing: [ClosedRange<UInt64>] = []
        for drop in drops {
            if let i = names.firstIndex(of: drop.segment) {
                through = max(through, i)
            } else if let (lsn, _) = SegmentHeader.parse(fileName: drop.segment),
                let next = segments.firstIndex(where: { $0.firstLSN > lsn }), next > 0
            {
                missing.append(lsn...(segments[next].firstLSN - 1))
                if next - 1 >= through {
                    through = next - 1
                    coveredEnd = segments[next].firstLSN - 1
                }
            } else {
                throw CloudletError.invalid("--drop-range names segment \(drop.segment), which is neither in \(directory) nor a gap in its log")
            }
        }
        precondition(through >= 0)
        if coveredEnd == nil || segments.indices.contains(through + 1) && coveredEnd! < segments[through + 1].firstLSN - 1 {
            coveredEnd = through + 1 < segments.count ? segments[through + 1].firstLSN - 1 : nil
        }

        let inputs = segments[0...through].map {
            SegmentInfo(
                path: $0.path, firstLSN: $0.firstLSN, lastLSN: coveredEnd ?? (UInt64.max - 1), size: 0, sealed: true,
                generation: $0.generation)
        }
        let writer = CompactionWriter(
            directory: directory, partition: partition, generation: layout.nextGeneration, inputs: Array(inputs),
            segmentSize: segmentSize, previous: layout.marker, fileSystem: fileSystem)
        var lost: [ClosedRange<UInt64>] = missing
        var dropped: UInt64 = 0
        var previous: UInt64 = 0
        var lostFrom: UInt64?
        do {
            for i in 0...through {
                let file = segments[i]
                let handle: any File
                do { handle = try fileSystem.open(file.path, options: .readOnly) } catch {
                    throw CloudletError.io(error, "opening segment \(file.path)")
                }
                defer { try? handle.close() }
                var reader = try SegmentReader(file: handle, path: file.path)
                let mine = drops.filter { $0.segment == names[i] }.sorted { $0.start < $1.start }
                var offset = UInt64(SegmentHeader.size)
                if !mine.contains(where: { $0.start == 0 }) {
                    let n = Int(min(UInt64(SegmentHeader.size), reader.size))
                    let h = try reader.load(0, count: n)
                    if case .failure(let defect) = SegmentHeader.parse(Array(reader.buffer[h..<(h + n)])) {
                        throw CloudletError.corruption(segment: file.path, offset: 0, "\(defect.reason) (not in a dropped range)")
                    }
                }
                while offset < reader.size {
                    if let d = mine.first(where: { $0.start <= offset && offset < $0.end }) {
                        dropped += min(d.end, reader.size) - offset
                        offset = min(d.end, reader.size)
                        if lostFrom == nil { lostFrom = previous + 1 }
                        continue
                    }
                    switch try reader.frame(at: offset, expecting: (previous + 1)...UInt64.max) {
                    case .failure(let defect):
                        throw CloudletError.corruption(segment: file.path, offset: offset, "\(defect.reason) (not in a dropped range)")
                    case .success(let (header, index)):
                        if let from = lostFrom {
                            if header.lsn > from { lost.append(from...(header.lsn - 1)) }
                            lostFrom = nil
                        }
                        if let end = coveredEnd, header.lsn > end {
                            throw CloudletError.corruption(
                                segment: file.path, offset: offset,
                                "frame LSN \(header.lsn) is past LSN \(end), where the next segment starts")
                        }
                        let position = FramePosition(segment: file.firstLSN, offset: offset, length: UInt32(header.frameLength))
                        try writer.appendCopy(
                            of: StoredFrame(header: header, buffer: reader.buffer, start: index, position: position, path: file.path))
                        previous = header.lsn
                        offset += UInt64(header.frameLength)
                    }
                }
                if coveredEnd == nil && i == through && file.isCompacted,
                    let h = LogLayout.header(of: file.path, fileSystem: fileSystem)
                {
                    coveredEnd = h.coveredThrough
                }
            }
            let covered = coveredEnd ?? previous
            if let from = lostFrom, covered >= from { lost.append(from...covered) }
            guard covered >= 1 else { throw CloudletError.invalid("nothing would be left of the log in \(directory)") }
            // The epochs of frames that could not be read are unknown: the marker says so rather than guess.
            if !lost.isEmpty || dropped > 0 { writer.forgetEpochs() }
            try writer.finish(coveredThrough: covered)
        } catch {
            writer.abandon()
            throw error
        }
        let replaced = try writer.install(backupDirectory: backupDirectory)
        return Outcome(marker: writer.marker, lost: lost, droppedBytes: dropped, replaced: replaced)
    }
}
