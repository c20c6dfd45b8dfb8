import CloudletCore

/// Finds where a log ends and replays it: walks the segment files in LSN order, checks every header and frame,
/// and applies the recovery rules of LogFormat.md ("Recovery").
///
/// - A bad frame in a sealed (non-last) segment, a gap or overlap between segments, an intact frame with the wrong
///   LSN: corruption, naming the segment file and byte offset.
/// - A bad frame in the last segment with no intact frame anywhere after it: a torn tail, the end of the log
///   (truncated in `.repair` mode). With an intact frame after it: corruption.
/// - A last segment whose header is short or damaged and holds no intact frame: a crash while creating it
///   (the header is rewritten in `.repair` mode).
struct LogRecovery {
    enum Mode {
        /// ``Log/open(directory:partition:configuration:fileSystem:afterLSN:startHint:replay:)`` read-write:
        /// truncate a torn tail, rewrite an unfinished header, keep the last segment open for appending.
        case repair
        /// Read-only open and ``LogScanner``: change nothing.
        case inspect
    }

    /// A segment as recovery found it.
    struct Segment {
        var firstLSN: UInt64
        /// The LSN of its last frame; for a compacted segment, the last LSN it covers.
        var lastLSN: UInt64
        /// Valid bytes (the file's size, or where a torn tail starts).
        var size: UInt64
        var path: String
        /// The compaction generation of a compacted segment; nil for a regular one.
        var generation: UInt32? = nil
    }

    struct Outcome {
        var segments: [Segment]
        var lastLSN: UInt64
        /// The partition in the segment headers (nil for an empty log scanned without one).
        var partition: UInt32?
        /// The last segment, open for writing (`.repair` mode only, and only when it is a regular segment).
        var lastFile: (any File)?
        var report: LogRecoveryReport
        /// The compaction marker in force.
        var marker: CompactionMarker?
        /// The highest compaction generation seen in the directory.
        var highestGeneration: UInt32
    }

    var directory: String
    var fileSystem: any FileSystem
    /// The partition every segment must belong to; nil accepts the first segment's.
    var partition: UInt32?
    var mode: Mode
    /// The epoch written into a rewritten segment header.
    var epoch: UInt64

    /// Where the scan starts.
    private struct Start {
        var index: Int
        var offset: UInt64
        var expectedLSN: UInt64
        /// Started from a checkpoint's position: the segment is entered mid-way.
        var hinted: Bool
    }

    /// Replays every valid frame with LSN > `afterLSN`, in order, starting at `startHint` when it checks out.
    func run(afterLSN: UInt64, startHint: FramePosition?, replay: (Frame) throws -> Void) throws -> Outcome {
        var report = LogRecoveryReport()
        let layout = try LogLayout.load(directory: directory, fileSystem: fileSystem)
        report.leftoverFiles = layout.leftovers
        if mode == .repair { try layout.removeLeftovers(fileSystem: fileSystem) }
        let files = layout.segments.map { (lsn: $0.firstLSN, path: $0.path, generation: $0.generation) }
        guard let first = files.first else {
            if afterLSN > 0 || layout.marker != nil {
                throw CloudletError.corruption(
                    "log directory \(directory) holds no segment files, but the \(afterLSN > 0 ? "checkpoint" : "compaction marker") covers LSN \(max(afterLSN, layout.marker?.coveredThrough ?? 0))")
            }
            return Outcome(
                segments: [], lastLSN: 0, partition: partition, lastFile: nil, report: report, marker: nil,
                highestGeneration: layout.highestGeneration)
        }
        var start = Start(index: 0, offset: UInt64(SegmentHeader.size), expectedLSN: first.lsn, hinted: false)
        if let hint = startHint, afterLSN > 0, let hinted = try hintedStart(hint, files: files, afterLSN: afterLSN) {
            start = hinted
            report.usedStartHint = true
        } else if afterLSN + 1 < first.lsn {
            throw CloudletError.corruption(
                "the log in \(directory) starts at LSN \(first.lsn) (\(first.path)); LSNs \(afterLSN + 1)…\(first.lsn - 1) are missing")
        }

        var partition = self.partition
        var segments: [Segment] = []
        // Segments before a checkpoint's position were checked when they were written and replayed: headers only.
        for i in 0..<start.index {
            let file = try openSegment(files[i].path, writable: false)
            defer { try? file.close() }
            var reader = try SegmentReader(file: file, path: files[i].path)  // reads the 48-byte header only
            guard
                case .valid(let header) = try checkHeader(
                    &reader, firstLSN: files[i].lsn, generation: files[i].generation, marker: layout.marker,
                    isLast: false, partition: &partition)
            else { preconditionFailure("checkHeader reports an unfinished header only for the last segment") }
            let last = header.isCompacted ? header.coveredThrough : files[i + 1].lsn - 1
            segments.append(
                Segment(
                    firstLSN: files[i].lsn, lastLSN: last, size: reader.size, path: files[i].path,
                    generation: files[i].generation))
        }
        if start.index > 0 && segments.last!.lastLSN + 1 != files[start.index].lsn {
            throw CloudletError.corruption(
                "segment \(files[start.index].path) starts at LSN \(files[start.index].lsn) but \(segments.last!.path) covers LSNs up to \(segments.last!.lastLSN)")
        }

        var expected = start.expectedLSN
        var lastFile: (any File)?
        for i in start.index..<files.count {
            let (lsn, path, generation) = files[i]
            let isLast = i == files.count - 1
            let enteredMidway = start.hinted && i == start.index
            if !enteredMidway && lsn != expected {
                let previous = segments.last?.path ?? "the start of the log"
                if lsn > expected {
                    throw CloudletError.corruption(
                        "segment \(path) starts at LSN \(lsn) but \(previous) ends at LSN \(expected - 1): LSNs \(expected)…\(lsn - 1) are missing (a deleted or lost segment file)")
                }
                throw CloudletError.corruption(
                    "segment \(path) starts at LSN \(lsn) but \(previous) already holds LSNs up to \(expected - 1) (overlapping segments)")
            }
            let writable = isLast && mode == .repair && generation == nil
            let file = try openSegment(path, writable: writable)
            var keepOpen = false
            defer { if !keepOpen { try? file.close() } }
            var reader = try SegmentReader(file: file, path: path)

            let checked = try checkHeader(
                &reader, firstLSN: lsn, generation: generation, marker: layout.marker, isLast: isLast,
                partition: &partition)
            if case .valid(let header) = checked, header.isCompacted {
                let from = enteredMidway ? start.offset : UInt64(SegmentHeader.size)
                let end = try scanCompacted(
                    &reader, segment: lsn, from: from, after: expected - 1, through: header.coveredThrough,
                    afterLSN: afterLSN, report: &report, replay: replay)
                expected = header.coveredThrough + 1
                segments.append(
                    Segment(
                        firstLSN: lsn, lastLSN: header.coveredThrough, size: end, path: path, generation: generation))
            } else if case .unfinished(let unfinished) = checked {
                // Only the last segment gets here: a crash while it was being created, no frame in it.
                report.tornTail = .init(path: path, offset: 0, reason: unfinished, droppedBytes: reader.size)
                var size: UInt64 = 0
                if mode == .repair {
                    let header = SegmentHeader(partition: partition ?? 0, firstLSN: lsn, epoch: epoch)
                    do {
                        try file.truncate(to: 0)
                        try file.write(header.encoded(), at: 0)
                        try file.fdatasync()
                    } catch { throw CloudletError.io(error, "rewriting the unfinished header of segment \(path)") }
                    size = UInt64(SegmentHeader.size)
                    report.rewroteSegmentHeader = true
                }
                segments.append(Segment(firstLSN: lsn, lastLSN: lsn - 1, size: size, path: path))
                expected = lsn
            } else {
                let from = enteredMidway ? start.offset : UInt64(SegmentHeader.size)
                let scan = try scanFrames(
                    &reader, segment: lsn, from: from, expected: expected, isLast: isLast, afterLSN: afterLSN,
                    report: &report, replay: replay)
                if let torn = scan.torn {
                    report.tornTail = torn
                    if mode == .repair {
                        do {
                            try file.truncate(to: torn.offset)
                            try file.fdatasync()
                        } catch { throw CloudletError.io(error, "truncating the torn tail of segment \(path)") }
                    }
                }
                expected = scan.nextLSN
                segments.append(Segment(firstLSN: lsn, lastLSN: scan.nextLSN - 1, size: scan.end, path: path))
            }
            if writable {
                keepOpen = true
                lastFile = file
            }
        }

        let lastLSN = expected - 1
        if let marker = layout.marker, lastLSN < marker.coveredThrough || files[0].generation == nil {
            try? lastFile?.close()
            throw CloudletError.corruption(
                "the compaction marker of \(directory) names generation \(marker.generation) covering LSNs up to \(marker.coveredThrough), but the log \(files[0].generation == nil ? "has no compacted segment of it (a deleted segment file)" : "ends at LSN \(lastLSN)")")
        }
        if afterLSN > lastLSN {
            try? lastFile?.close()
            throw CloudletError.corruption(
                "the log in \(directory) ends at LSN \(lastLSN), before LSN \(afterLSN) that the checkpoint covers")
        }
        report.lastLSN = lastLSN
        return Outcome(
            segments: segments, lastLSN: lastLSN, partition: partition, lastFile: lastFile, report: report,
            marker: layout.marker, highestGeneration: layout.highestGeneration)
    }

    private func openSegment(_ path: String, writable: Bool) throws -> any File {
        do { return try fileSystem.open(path, options: writable ? [] : .readOnly) } catch {
            throw CloudletError.io(error, "opening segment \(path)")
        }
    }

    /// Where to start from a checkpoint's position, or nil to scan from the first segment: the position must be in
    /// a segment that exists and hold an intact frame with LSN `afterLSN + 1`, or be the end of its segment with
    /// the next segment (if any) starting at that LSN.
    private func hintedStart(
        _ hint: FramePosition, files: [(lsn: UInt64, path: String, generation: UInt32?)], afterLSN: UInt64
    ) throws -> Start? {
        // A position inside a compacted segment is never used as a start: recovery then scans from the start.
        guard hint.offset >= UInt64(SegmentHeader.size), let index = files.firstIndex(where: { $0.lsn == hint.segment }),
            files[index].lsn <= afterLSN + 1, files[index].generation == nil
        else { return nil }
        let file = try openSegment(files[index].path, writable: false)
        defer { try? file.close() }
        var reader = try SegmentReader(file: file, path: files[index].path)
        let start = Start(index: index, offset: hint.offset, expectedLSN: afterLSN + 1, hinted: true)
        if hint.offset > reader.size { return nil }
        if hint.offset == reader.size {
            return index == files.count - 1 || files[index + 1].lsn == afterLSN + 1 ? start : nil
        }
        guard case .success = try reader.frame(at: hint.offset, expecting: (afterLSN + 1)...(afterLSN + 1)) else { return nil }
        return start
    }

    enum HeaderCheck {
        case valid(SegmentHeader)
        /// The last (regular) segment's header is unfinished: what is wrong with it.
        case unfinished(String)
    }

    /// Checks a segment header against its file name (first LSN, compaction generation) and the marker. For the last
    /// regular segment, reports an unfinished header (short or damaged with no intact frame after it: a crash while
    /// creating the file). Throws for anything else.
    private func checkHeader(
        _ reader: inout SegmentReader, firstLSN: UInt64, generation: UInt32?, marker: CompactionMarker?, isLast: Bool,
        partition: inout UInt32?
    ) throws -> HeaderCheck {
        let path = reader.path
        let n = Int(min(UInt64(SegmentHeader.size), reader.size))
        let i = try reader.load(0, count: n, exact: true)
        switch SegmentHeader.parse(Array(reader.buffer[i..<(i + n)])) {
        case .success(let header):
            if let problem = SegmentHeader.mismatch(header, firstLSN: firstLSN, generation: generation, partition: partition, marker: marker) {
                throw CloudletError.corruption(segment: path, offset: 0, problem)
            }
            partition = header.partition
            return .valid(header)
        case .failure(let defect):
            if !defect.supported { throw CloudletError(.notSupported, "segment \(path): \(defect.reason)") }
            guard isLast && generation == nil else {
                throw CloudletError.corruption(segment: path, offset: 0, defect.reason)
            }
            if let next = try reader.findValidFrame(from: UInt64(SegmentHeader.size), after: firstLSN - 1) {
                throw CloudletError.corruption(
                    segment: path, offset: 0,
                    "\(defect.reason); an intact frame (LSN \(next.lsn)) follows at offset \(next.offset)")
            }
            return .unfinished(defect.reason)
        }
    }

    private struct Scan {
        /// Offset just past the last valid frame.
        var end: UInt64
        var nextLSN: UInt64
        var torn: LogRecoveryReport.TornTail?
    }

    /// Checks the frames of one segment from `from`, replaying those after `afterLSN`.
    private func scanFrames(
        _ reader: inout SegmentReader, segment: UInt64, from: UInt64, expected: UInt64, isLast: Bool,
        afterLSN: UInt64, report: inout LogRecoveryReport, replay: (Frame) throws -> Void
    ) throws -> Scan {
        var offset = from
        var expected = expected
        while offset < reader.size {
            let defect: FrameHeader.Defect
            switch try reader.frame(at: offset, expecting: expected...expected) {
            case .success(let (header, index)):
                if header.lsn > afterLSN {
                    try Self.replayFrame(header, index, of: reader, segment: segment, at: offset, report: &report, replay)
                }
                report.lastEpoch = header.epoch
                offset += UInt64(header.frameLength)
                expected += 1
                continue
            case .failure(let d):
                defect = d
            }
            guard isLast && !defect.definitive else {
                throw CloudletError.corruption(segment: reader.path, offset: offset, defect.reason)
            }
            if let next = try reader.findValidFrame(from: offset + 1, after: expected - 1) {
                throw CloudletError.corruption(
                    segment: reader.path, offset: offset,
                    "\(defect.reason); an intact frame (LSN \(next.lsn)) follows at offset \(next.offset), so this is not a torn tail")
            }
            let torn = LogRecoveryReport.TornTail(
                path: reader.path, offset: offset, reason: defect.reason, droppedBytes: reader.size - offset)
            return Scan(end: offset, nextLSN: expected, torn: torn)
        }
        return Scan(end: offset, nextLSN: expected, torn: nil)
    }

    /// Hands a frame whose header checked out to `replay`, once its payload does too (decompressed, checksummed).
    private static func replayFrame(
        _ header: FrameHeader, _ index: Int, of reader: SegmentReader, segment: UInt64, at offset: UInt64,
        report: inout LogRecoveryReport, _ replay: (Frame) throws -> Void
    ) throws {
        switch header.payload(reader.buffer, at: index) {
        case .success(let payload):
            let position = FramePosition(segment: segment, offset: offset, length: UInt32(header.frameLength))
            try replay(
                Frame(lsn: header.lsn, epoch: header.epoch, type: header.type, flags: header.flags, payload: payload, position: position))
            report.framesReplayed += 1
        case .failure(let d):
            throw CloudletError.corruption(segment: reader.path, offset: offset, d.reason)
        }
    }

    /// Checks the frames of a compacted segment from `from`: LSNs increase (with gaps) after `after` and stay within
    /// `through`; any bad frame is corruption (compacted segments are complete before the marker names them).
    /// Returns the offset past the last frame.
    private func scanCompacted(
        _ reader: inout SegmentReader, segment: UInt64, from: UInt64, after: UInt64, through: UInt64,
        afterLSN: UInt64, report: inout LogRecoveryReport, replay: (Frame) throws -> Void
    ) throws -> UInt64 {
        var offset = from
        var previous = after
        while offset < reader.size {
            guard previous < through else {
                throw CloudletError.corruption(
                    segment: reader.path, offset: offset,
                    "bytes after the frame of LSN \(previous), the last LSN this compacted segment covers")
            }
            switch try reader.frame(at: offset, expecting: (previous + 1)...through) {
            case .failure(let d):
                throw CloudletError.corruption(segment: reader.path, offset: offset, d.reason)
            case .success(let (header, index)):
                if header.lsn > afterLSN {
                    try Self.replayFrame(header, index, of: reader, segment: segment, at: offset, report: &report, replay)
                }
                report.lastEpoch = header.epoch
                previous = header.lsn
                offset += UInt64(header.frameLength)
            }
        }
        return offset
    }
}

extension SegmentHeader {
    /// What is wrong with a valid header given where it was found, or nil: the file name's first LSN and
    /// generation, the partition of the log, the marker's generation and range.
    static func mismatch(
        _ header: SegmentHeader, firstLSN: UInt64, generation: UInt32?, partition: UInt32?, marker: CompactionMarker?
    ) -> String? {
        if let expected = partition, header.partition != expected {
            return "the segment belongs to partition \(header.partition), not \(expected)"
        }
        if header.firstLSN != firstLSN { return "the header's first LSN \(header.firstLSN) does not match the file name" }
        switch (generation, header.isCompacted) {
        case (nil, true): return "a compacted segment (generation \(header.generation)) under a regular segment's name"
        case (.some, false): return "a regular segment under a compacted segment's name"
        case (.some(let g), true):
            if header.generation != g {
                return "the header's compaction generation \(header.generation) does not match the file name's \(g)"
            }
            if let marker, header.coveredThrough > marker.coveredThrough {
                return "the segment covers LSNs up to \(header.coveredThrough), past the \(marker.coveredThrough) of the compaction marker"
            }
        case (nil, false): break
        }
        return nil
    }
}
