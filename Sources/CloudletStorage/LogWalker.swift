import CloudletCore

/// A problem found in a log directory, at a place: the segment file (or the file that should be there) and the
/// byte offset in it.
public struct LogFinding: Sendable, Hashable, CustomStringConvertible {
    public enum Severity: String, Sendable, Hashable {
        /// Corruption or a missing file: the store is not all well.
        case error
        /// Legal leftovers of a crash (a torn tail, files of an interrupted compaction) that the next read-write
        /// open cleans up.
        case warning
    }

    public var severity: Severity
    /// The file: a segment, the compaction marker, a leftover — or, for a missing segment, the name it should have.
    public var path: String
    /// Where in the file, if the finding is about a place in it.
    public var offset: UInt64?
    public var message: String
    /// For a damaged region of a segment: the bytes that cannot be read, from `offset` to the next intact frame (or
    /// the end of the file) — what `cloudlet-tool repair --drop-range` would drop.
    public var damaged: Range<UInt64>?

    public init(_ severity: Severity, path: String, offset: UInt64?, _ message: String, damaged: Range<UInt64>? = nil) {
        self.severity = severity
        self.path = path
        self.offset = offset
        self.message = message
        self.damaged = damaged
    }

    public var description: String {
        "\(severity.rawValue): \(path)\(offset.map { " offset \($0)" } ?? ""): \(message)"
    }
}

/// What ``LogWalker`` found about one segment file.
public struct WalkedSegment: Sendable, Hashable {
    public var path: String
    public var firstLSN: UInt64
    /// The last LSN it holds (regular) or covers (compacted); `firstLSN - 1` when empty.
    public var lastLSN: UInt64
    /// The compaction generation of a compacted segment; nil for a regular one.
    public var generation: UInt32?
    /// The epoch in its header (nil if the header is damaged).
    public var epoch: UInt64?
    /// The file's size.
    public var size: UInt64
    /// Intact frames, and the bytes they take (headers included).
    public var frames = 0
    public var frameBytes: UInt64 = 0
    /// Payload bytes as stored and once decompressed.
    public var storedPayloadBytes: UInt64 = 0
    public var payloadBytes: UInt64 = 0
    /// Frames stored LZ4-compressed.
    public var compressedFrames = 0
    /// The smallest and largest epoch of its frames.
    public var minEpoch: UInt64?
    public var maxEpoch: UInt64?

    public var isCompacted: Bool { generation != nil }
}

/// What ``LogWalker/walk(progress:_:)`` found.
public struct LogWalkReport: Sendable {
    public var layout: LogLayout
    public var segments: [WalkedSegment] = []
    public var findings: [LogFinding] = []
    /// The partition named by the segment headers.
    public var partition: UInt32?
    /// Where the log ends (the last LSN an open would recover).
    public var lastLSN: UInt64 = 0
    /// A torn tail at the end of the last segment (also reported as a warning).
    public var tornTail: LogRecoveryReport.TornTail?

    /// Whether nothing is wrong (warnings allowed).
    public var isClean: Bool { !findings.contains { $0.severity == .error } }
}

/// Walks every frame of a log directory for offline tools (verify, dump, stats): applies the rules of recovery
/// (LogFormat.md, "Recovery") but never stops at the first problem and never writes. A bad frame, a bad header, a
/// missing or overlapping segment becomes a ``LogFinding`` naming the file and offset; the walk resynchronizes on
/// the next intact frame and goes on.
public struct LogWalker: Sendable {
    public let directory: String
    let fileSystem: any FileSystem

    public init(directory: String, fileSystem: any FileSystem = PosixFileSystem()) {
        self.directory = Path.normalize(directory)
        self.fileSystem = fileSystem
    }

    /// The total size of the log's segment files (for progress reporting).
    public func totalBytes() throws -> UInt64 {
        let layout = try LogLayout.load(directory: directory, fileSystem: fileSystem)
        var total: UInt64 = 0
        for s in layout.segments {
            if let file = try? fileSystem.open(s.path, options: .readOnly) {
                total += (try? file.size()) ?? 0
                try? file.close()
            }
        }
        return total
    }

    /// Calls `body` with every intact frame in log order; `progress` with the bytes walked so far (now and then).
    /// Throws only what `body` throws, or `.io` when the directory cannot be listed.
    public func walk(
        progress: ((UInt64) -> Void)? = nil, _ body: (StoredFrame) throws -> Void
    ) throws -> LogWalkReport {
        var markerFinding: LogFinding?
        let layout: LogLayout
        do {
            layout = try LogLayout.load(directory: directory, fileSystem: fileSystem)
        } catch let e as CloudletError where e.code == .corruption || e.code == .notSupported {
            // A damaged marker: report it and walk the regular segments as if no compaction had happened.
            markerFinding = LogFinding(.error, path: Path.join(directory, CompactionMarker.fileName), offset: 0, e.message)
            layout = try Self.layoutIgnoringMarker(directory: directory, fileSystem: fileSystem)
        }
        var report = LogWalkReport(layout: layout)
        if let markerFinding { report.findings.append(markerFinding) }
        for path in layout.leftovers {
            report.findings.append(
                LogFinding(
                    .warning, path: path, offset: nil,
                    "not part of the log: left by an interrupted compaction (the next read-write open deletes it)"))
        }
        var walked: UInt64 = 0
        var expected: UInt64? = 1
        var previousDamaged = false
        for (i, file) in layout.segments.enumerated() {
            let isLast = i == layout.segments.count - 1
            if let e = expected, file.firstLSN != e {
                if file.firstLSN > e {
                    let missing = e <= (layout.marker?.coveredThrough ?? 0)
                        ? SegmentHeader.fileName(firstLSN: e, generation: layout.marker!.generation)
                        : SegmentHeader.fileName(firstLSN: e)
                    let cause = previousDamaged
                        ? "lost in the damaged end of \(Path.name(layout.segments[i - 1].path))"
                        : "segment file \(missing) was deleted or lost"
                    report.findings.append(
                        LogFinding(
                            .error, path: previousDamaged ? layout.segments[i - 1].path : Path.join(directory, missing),
                            offset: previousDamaged ? nil : 0,
                            "LSNs \(e)…\(file.firstLSN - 1) are missing: \(cause) (the next segment, \(Path.name(file.path)), starts at LSN \(file.firstLSN))"))
                } else {
                    report.findings.append(
                        LogFinding(
                            .error, path: file.path, offset: 0,
                            "the segment starts at LSN \(file.firstLSN) but LSNs up to \(e - 1) are already in earlier segments (overlapping segments)"))
                }
            }
            var segment = WalkedSegment(
                path: file.path, firstLSN: file.firstLSN, lastLSN: file.firstLSN - 1, generation: file.generation,
                size: 0)
            defer { report.segments.append(segment) }
            let handle: any File
            do { handle = try fileSystem.open(file.path, options: .readOnly) } catch {
                report.findings.append(LogFinding(.error, path: file.path, offset: nil, "cannot open: \(error)"))
                expected = nil
                previousDamaged = true
                continue
            }
            defer { try? handle.close() }
            var reader: SegmentReader
            do { reader = try SegmentReader(file: handle, path: file.path) } catch let e as CloudletError {
                report.findings.append(LogFinding(.error, path: file.path, offset: nil, e.message))
                expected = nil
                previousDamaged = true
                continue
            }
            segment.size = reader.size
            let result = try walkSegment(
                &reader, file: file, isLast: isLast, layout: layout, report: &report, segment: &segment,
                walkedBefore: walked, progress: progress, body)
            walked += reader.size
            progress?(walked)
            expected = result.next
            previousDamaged = result.damaged
        }
        if let marker = layout.marker {
            if layout.segments.first?.isCompacted != true {
                report.findings.append(
                    LogFinding(
                        .error, path: Path.join(directory, SegmentHeader.fileName(firstLSN: 1, generation: marker.generation)),
                        offset: 0,
                        "the compaction marker names generation \(marker.generation) covering LSNs 1…\(marker.coveredThrough), but no compacted segment of it exists (deleted or lost)"
                    ))
            } else if let e = expected, e - 1 < marker.coveredThrough {
                report.findings.append(
                    LogFinding(
                        .error, path: Path.join(directory, SegmentHeader.fileName(firstLSN: e, generation: marker.generation)),
                        offset: 0,
                        "LSNs \(e)…\(marker.coveredThrough) covered by the compaction marker are missing (a deleted or lost compacted segment)"
                    ))
            }
        }
        report.lastLSN = expected.map { $0 - 1 } ?? (report.segments.last?.lastLSN ?? 0)
        return report
    }

    /// The layout of a directory whose marker is unreadable: its regular segments only.
    private static func layoutIgnoringMarker(directory: String, fileSystem: any FileSystem) throws -> LogLayout {
        let names: [String]
        do { names = try fileSystem.listDirectory(directory) } catch {
            throw CloudletError.io(error, "listing log directory \(directory)")
        }
        var layout = LogLayout(directory: directory, marker: nil, segments: [], leftovers: [], highestGeneration: 0)
        for name in names {
            guard let (lsn, generation) = SegmentHeader.parse(fileName: name), lsn > 0 else { continue }
            let path = Path.join(directory, name)
            if generation == nil {
                layout.segments.append(LogLayout.SegmentFile(path: path, firstLSN: lsn, generation: nil))
            } else {
                layout.leftovers.append(path)
            }
        }
        layout.segments.sort { $0.firstLSN < $1.firstLSN }
        return layout
    }

    /// Walks one segment's frames; returns the LSN the next segment should start at (nil if unknown) and whether
    /// the segment's end is damaged.
    private func walkSegment(
        _ reader: inout SegmentReader, file: LogLayout.SegmentFile, isLast: Bool, layout: LogLayout,
        report: inout LogWalkReport, segment: inout WalkedSegment, walkedBefore: UInt64,
        progress: ((UInt64) -> Void)?, _ body: (StoredFrame) throws -> Void
    ) throws -> (next: UInt64?, damaged: Bool) {
        let path = file.path
        func error(_ offset: UInt64?, _ message: String, damaged: Range<UInt64>? = nil) {
            report.findings.append(LogFinding(.error, path: path, offset: offset, message, damaged: damaged))
        }
        // Header.
        let n = Int(min(UInt64(SegmentHeader.size), reader.size))
        let i = try reader.load(0, count: n)
        let header: SegmentHeader
        switch SegmentHeader.parse(Array(reader.buffer[i..<(i + n)])) {
        case .failure(let defect):
            if isLast && file.generation == nil && defect.supported,
                try reader.findValidFrame(from: UInt64(SegmentHeader.size), after: file.firstLSN - 1) == nil
            {
                report.findings.append(
                    LogFinding(
                        .warning, path: path, offset: 0,
                        "\(defect.reason): a crash while creating the segment (it holds no frame; the next read-write open rewrites its header)"))
                report.tornTail = .init(path: path, offset: 0, reason: defect.reason, droppedBytes: reader.size)
                return (file.firstLSN, false)
            }
            let next = defect.supported ? try reader.findValidFrame(from: UInt64(SegmentHeader.size), after: 0) : nil
            error(
                0, defect.reason + (defect.supported ? "" : " (not supported by this version)"),
                damaged: defect.supported ? 0..<(next?.offset ?? reader.size) : nil)
            return (nil, true)
        case .success(let h):
            header = h
        }
        segment.epoch = header.epoch
        if let problem = SegmentHeader.mismatch(
            header, firstLSN: file.firstLSN, generation: file.generation, partition: report.partition, marker: layout.marker)
        {
            error(0, problem)
            return (nil, true)
        }
        report.partition = header.partition

        // Frames.
        var offset = UInt64(SegmentHeader.size)
        var previous = file.firstLSN - 1
        var damaged = false
        var nextProgress = walkedBefore + (4 << 20)
        while offset < reader.size {
            let range: ClosedRange<UInt64>
            if header.isCompacted {
                guard previous < header.coveredThrough else {
                    error(
                        offset, "\(reader.size - offset) bytes after the frame of LSN \(previous), the last LSN this compacted segment covers",
                        damaged: offset..<reader.size)
                    damaged = true
                    break
                }
                range = (previous + 1)...header.coveredThrough
            } else {
                range = (previous + 1)...(previous + 1)
            }
            switch try reader.frame(at: offset, expecting: range) {
            case .success(let (frameHeader, index)):
                let position = FramePosition(
                    segment: file.firstLSN, offset: offset, length: UInt32(frameHeader.frameLength))
                segment.frames += 1
                segment.frameBytes += UInt64(frameHeader.frameLength)
                segment.storedPayloadBytes += UInt64(frameHeader.storedLength)
                segment.payloadBytes += UInt64(frameHeader.uncompressedLength)
                if frameHeader.isCompressed { segment.compressedFrames += 1 }
                segment.minEpoch = min(segment.minEpoch ?? .max, frameHeader.epoch)
                segment.maxEpoch = max(segment.maxEpoch ?? 0, frameHeader.epoch)
                try body(StoredFrame(header: frameHeader, buffer: reader.buffer, start: index, position: position, path: path))
                previous = frameHeader.lsn
                offset += UInt64(frameHeader.frameLength)
                if walkedBefore + offset >= nextProgress {
                    progress?(walkedBefore + offset)
                    nextProgress = walkedBefore + offset + (4 << 20)
                }
            case .failure(let defect):
                let next = try reader.findValidFrame(from: offset + 1, after: previous)
                if isLast && file.generation == nil && !defect.definitive && next == nil {
                    report.findings.append(
                        LogFinding(
                            .warning, path: path, offset: offset,
                            "torn tail: \(defect.reason); the log ends here (a crash while writing; the next read-write open truncates \(reader.size - offset) bytes)"
                        ))
                    report.tornTail = .init(path: path, offset: offset, reason: defect.reason, droppedBytes: reader.size - offset)
                    segment.lastLSN = previous
                    return (previous + 1, false)
                }
                damaged = true
                if let next {
                    error(
                        offset,
                        "\(defect.reason); resuming at the next intact frame, LSN \(next.lsn) at offset \(next.offset) (\(next.offset - offset) bytes skipped\(next.lsn > previous + 1 && !header.isCompacted ? ", LSNs \(previous + 1)…\(next.lsn - 1) lost" : ""))",
                        damaged: offset..<next.offset)
                    offset = next.offset
                    previous = next.lsn - 1
                    damaged = false
                } else {
                    error(
                        offset, "\(defect.reason); no intact frame follows in this segment (\(reader.size - offset) bytes unreadable)",
                        damaged: offset..<reader.size)
                    offset = reader.size
                }
            }
        }
        if header.isCompacted {
            segment.lastLSN = header.coveredThrough
            return (header.coveredThrough + 1, damaged)
        }
        segment.lastLSN = previous
        return (previous + 1, damaged)
    }
}
