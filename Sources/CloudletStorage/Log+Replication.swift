import CloudletConcurrency
import CloudletCore

/// What a follower's log needs beyond ``Log/stage(type:payload:compressible:admitOverLimit:)``: appending a leader's
/// frames verbatim, fencing by epoch, reading stored frames for followers, and truncating a divergent suffix.
/// LogFormat.md, "Replication", says what each guarantees.
extension Log {
    // MARK: Epochs

    /// The highest leader epoch this log has seen: its last frame's, a verbatim append's leader epoch, or set by
    /// ``fence(epoch:)``. Not persisted on its own: after a reopen it is the epoch of the last frame (or
    /// ``LogConfiguration/epoch``), so the replication layer fences again with the coordinator's epoch.
    public var highestEpoch: UInt64 { monitor.withLock { $0.highestEpoch } }

    /// Refuses, from now on, staging under an epoch older than `epoch` and verbatim appends from the leader of an
    /// older epoch (a deposed leader).
    /// Never lowers the fence.
    public func fence(epoch: UInt64) {
        monitor.withLock { s in s.highestEpoch = max(s.highestEpoch, epoch) }
    }

    /// Makes this log the leader's for `epoch`: ``stage(type:payload:compressible:admitOverLimit:)`` stamps `epoch`
    /// into every frame from now on. Throws `.serviceUnavailable` ("fenced") if a newer epoch has been seen.
    public func lead(epoch: UInt64) throws {
        try monitor.withLock { s throws in
            guard epoch >= s.highestEpoch else {
                throw CloudletError(
                    .serviceUnavailable,
                    "fenced: partition \(partition) cannot lead in epoch \(epoch), epoch \(s.highestEpoch) has been seen")
            }
            s.epoch = epoch
            s.highestEpoch = epoch
        }
    }

    // MARK: Verbatim append

    /// Appends frames exactly as a leader stored them — `bytes` is one or more whole frames (header and stored
    /// payload, as ``frames(from:maxBytes:)`` returns them) — keeping their LSN, epoch, flags and bytes; the
    /// committer writes and syncs them like staged ones (wait with ``waitDurable(_:)``). `leaderEpoch` is the epoch of
    /// the leader that sent them (the fencing token): its frames may be of that epoch or of older ones it carries,
    /// never newer. All or nothing: every frame is checked before any is staged. Returns the last LSN appended.
    ///
    /// Throws `.corruption` for a frame whose checksum or fields do not check out, or bytes that end mid-frame;
    /// `.invalidArguments` for a frame whose LSN is not the next one (a gap, or a frame already held), or whose epoch
    /// is older than the frame before it or newer than `leaderEpoch`; `.serviceUnavailable` ("fenced") when
    /// `leaderEpoch` is older than ``highestEpoch`` (a deposed leader). Never applies any of them then: the caller
    /// fetches again (or truncates, see ``truncate(directory:partition:after:fileSystem:)``). Raises
    /// ``highestEpoch`` to `leaderEpoch`. Blocks while the pending buffer is full, like `stage`.
    @discardableResult
    public func appendVerbatim(_ bytes: [UInt8], leaderEpoch: UInt64) throws -> UInt64 {
        try appendVerbatimFrames(bytes, leaderEpoch: leaderEpoch).last?.lsn ?? lastLSN
    }

    /// ``appendVerbatim(_:leaderEpoch:)`` returning each frame appended, decoded (payload decompressed) and with
    /// its position in the log: what a follower applies to the state derived from the log.
    public func appendVerbatimFrames(_ bytes: [UInt8], leaderEpoch: UInt64) throws -> [Frame] {
        try appendVerbatimFrames(try Self.checkVerbatim(bytes, partition: partition), leaderEpoch: leaderEpoch)
    }

    /// Whole frames as a leader stored them, each checked (header, checksum, fields) and decoded once
    /// (``checkVerbatim(_:partition:)``): a follower looks into them before it appends them
    /// (``appendVerbatimFrames(_:leaderEpoch:)-(CheckedFrames,_)``), which then neither checks nor decompresses
    /// them again.
    public struct CheckedFrames: Sendable {
        public let bytes: [UInt8]
        let slices: [FrameSlice]
        /// The frames decoded (payload decompressed; positions not known: zero).
        public let frames: [Frame]
    }

    /// Checks and decodes the frames in `bytes`; throws `.corruption` as ``appendVerbatim(_:leaderEpoch:)`` would.
    public static func checkVerbatim(_ bytes: [UInt8], partition: UInt32) throws -> CheckedFrames {
        let slices = try splitFrames(bytes, partition: partition)
        return CheckedFrames(bytes: bytes, slices: slices, frames: try decode(bytes, slices, partition: partition))
    }

    /// ``appendVerbatimFrames(_:leaderEpoch:)-([UInt8],_)`` of frames checked already.
    public func appendVerbatimFrames(_ checked: CheckedFrames, leaderEpoch: UInt64) throws -> [Frame] {
        if configuration.readOnly {
            throw CloudletError(.readOnly, "the log of partition \(partition) in \(directory) is open read-only")
        }
        let (bytes, frames, decoded) = (checked.bytes, checked.slices, checked.frames)
        ThreadBridge.checkMayBlock("appending frames to partition \(partition)'s log (backpressure)")
        let segmentSize = UInt64(configuration.segmentSize)
        let limit = configuration.maxPendingBytes
        let (wasIdle, positions) = try monitor.withLock(
            waitingOn: .progress,
            until: { s in s.failure != nil || s.closing || s.unwrittenBytes == 0 || s.unwrittenBytes + bytes.count <= limit }
        ) { s throws -> (Bool, [FramePosition]) in
            if let failure = s.failure { throw failure }
            if s.closing { throw CloudletError(.readOnly, "the log of partition \(partition) in \(directory) is closed") }
            guard leaderEpoch >= s.highestEpoch else {
                throw CloudletError(
                    .serviceUnavailable,
                    "fenced: partition \(partition) refuses frames from the leader of epoch \(leaderEpoch), epoch \(s.highestEpoch) has been seen")
            }
            var expected = s.lastLSN + 1
            var epoch = s.lastFrameEpoch
            for frame in frames {
                guard frame.lsn == expected else {
                    throw CloudletError.invalid(
                        "partition \(partition): a frame with LSN \(frame.lsn) where LSN \(expected) comes next"
                            + (frame.lsn > expected ? " (LSNs \(expected)…\(frame.lsn - 1) are missing)" : " (already held)"))
                }
                guard frame.epoch >= epoch, frame.epoch <= leaderEpoch else {
                    throw CloudletError.invalid(
                        "partition \(partition): LSN \(frame.lsn) has epoch \(frame.epoch), "
                            + (frame.epoch < epoch ? "older than the \(epoch) of the frame before it" : "newer than its leader's \(leaderEpoch)"))
                }
                expected += 1
                epoch = frame.epoch
            }
            s.highestEpoch = leaderEpoch
            var wasIdle = false
            var positions: [FramePosition] = []
            for frame in frames {
                let range = frame.range
                let (position, idle) = s.enqueue(lsn: frame.lsn, epoch: frame.epoch, length: range.count, segmentSize: segmentSize) {
                    $0.append(contentsOf: bytes[range])
                }
                wasIdle = wasIdle || idle
                positions.append(position)
                if frame.isCompressed { s.stats.compressedFrames += 1 }
            }
            return (wasIdle, positions)
        }
        if wasIdle { monitor.signal(.work) }
        return zip(decoded, positions).map { frame, position in
            var frame = frame
            frame.position = position
            return frame
        }
    }

    /// The frames in `bytes` (whole frames as ``frames(from:maxBytes:)`` returns them), checked and decoded (payload
    /// decompressed; positions are not known: zero). Throws `.corruption`.
    public static func decodeVerbatim(_ bytes: [UInt8], partition: UInt32) throws -> [Frame] {
        try checkVerbatim(bytes, partition: partition).frames
    }

    private static func decode(_ bytes: [UInt8], _ frames: [FrameSlice], partition: UInt32) throws -> [Frame] {
        try frames.map { f -> Frame in
            switch FrameHeader.check(bytes, at: f.range.lowerBound, available: f.range.count) {
            case .failure(let defect): throw CloudletError(.corruption, "partition \(partition): LSN \(f.lsn) received: \(defect.reason)")
            case .success(let header):
                switch header.payload(bytes, at: f.range.lowerBound) {
                case .failure(let defect):
                    throw CloudletError(.corruption, "partition \(partition): LSN \(f.lsn) received: \(defect.reason)")
                case .success(let payload):
                    return Frame(
                        lsn: header.lsn, epoch: header.epoch, type: header.type, flags: header.flags, payload: payload,
                        position: FramePosition(segment: 0, offset: 0, length: UInt32(f.range.count)))
                }
            }
        }
    }

    /// The frames in `bytes` (whole frames as ``frames(from:maxBytes:)`` returns them), each checked (header,
    /// checksum, fields): LSN, epoch and where it lies in `bytes`. Throws `.corruption`.
    public static func splitVerbatim(_ bytes: [UInt8], partition: UInt32) throws -> [(lsn: UInt64, epoch: UInt64, range: Range<Int>)] {
        try splitFrames(bytes, partition: partition).map { ($0.lsn, $0.epoch, $0.range) }
    }

    /// One frame inside a byte buffer of frames.
    struct FrameSlice {
        var lsn: UInt64
        var epoch: UInt64
        var isCompressed: Bool
        var range: Range<Int>
    }

    /// Splits `bytes` into whole frames and checks each (header, checksum, fields); throws `.corruption`.
    static func splitFrames(_ bytes: [UInt8], partition: UInt32) throws -> [FrameSlice] {
        var frames: [FrameSlice] = []
        var offset = 0
        while offset < bytes.count {
            func corrupt(_ reason: String) -> CloudletError {
                CloudletError(
                    .corruption, "partition \(partition): frame \(frames.count + 1) (byte \(offset)) received: \(reason)")
            }
            let header: FrameHeader
            switch FrameHeader.check(bytes, at: offset, available: bytes.count - offset) {
            case .failure(let defect): throw corrupt(defect.reason)
            case .success(let h): header = h
            }
            if let defect = header.checkBody(bytes, at: offset) { throw corrupt(defect.reason) }
            frames.append(
                FrameSlice(
                    lsn: header.lsn, epoch: header.epoch, isCompressed: header.isCompressed,
                    range: offset..<(offset + header.frameLength)))
            offset += header.frameLength
        }
        return frames
    }

    // MARK: Reading for followers

    /// Stored frames, verbatim, for a follower.
    public struct FrameBatch: Sendable {
        /// Whole frames as stored (header and stored payload), concatenated: what ``Log/appendVerbatim(_:)`` takes.
        public var bytes: [UInt8]
        /// The LSN of the first and of the last frame in `bytes` (`lastLSN < firstLSN` when empty).
        public var firstLSN: UInt64
        public var lastLSN: UInt64
        /// The log's durable LSN when the batch was read: the follower is caught up when `lastLSN` reaches it.
        public var durableLSN: UInt64
        /// Each frame's LSN, epoch and bytes in `bytes` (checked as they were read: no need to split them again).
        public var frames: [(lsn: UInt64, epoch: UInt64, range: Range<Int>)] = []
    }

    /// The durable frames from LSN `lsn` on, verbatim (bytes, LZ4 and CRC32C as stored), at least one frame (when
    /// there is one) and then as many as fit in `maxBytes`. Empty when `lsn` is past the durable end. Throws
    /// `.changeTokenExpired` when `lsn` lies in a compacted prefix (those frames were rewritten or dropped: the
    /// follower needs a copy of the segments instead), `.corruption` for a bad stored frame, `.invalidArguments`
    /// for `lsn` 0.
    ///
    /// `includingUnsynced`: also the frames the committer has written to the files and not fsynced yet (a
    /// replicated leader ships them while it syncs them; a crash of the machine may still lose them here). The
    /// batch's ``FrameBatch/durableLSN`` stays the fsynced end.
    ///
    /// `reader` names who reads (a follower's node): a reader's next fetch from where its last batch ended reads on
    /// from there, whatever other readers fetch in between.
    ///
    /// `through`: the batch stops after this LSN (a leader serves what it had written when it decided to, and the
    /// reader's place is kept after the last frame it is sent, where its next fetch starts).
    public func frames(
        from lsn: UInt64, through: UInt64 = .max, maxBytes: Int, includingUnsynced: Bool = false, reader: String = ""
    ) throws -> FrameBatch {
        guard lsn > 0 else { throw CloudletError.invalid("LSNs start at 1") }
        ThreadBridge.checkMayBlock("reading frames of partition \(partition) for a follower")
        let (segments, durable, readable, hint) = monitor.withLock { s in
            (
                s.segments.map {
                    // A segment the in-flight group writes to holds more, readable, than its durable size.
                    let written = includingUnsynced ? s.written[$0.firstLSN] : nil
                    return SegmentInfo(
                        path: $0.path, firstLSN: $0.firstLSN, lastLSN: max($0.lastLSN, written?.lastLSN ?? 0),
                        size: max($0.size, written?.size ?? 0), sealed: $0.sealed, generation: $0.generation)
                }, s.durableLSN, min(includingUnsynced ? max(s.durableLSN, s.writtenLSN) : s.durableLSN, through),
                s.serveHints[reader].flatMap { $0.lsn == lsn ? (lsn: lsn, segment: $0.segment, offset: $0.offset) : nil }
                    ?? s.recentStart(atOrBefore: lsn)
            )
        }
        var batch = FrameBatch(bytes: [], firstLSN: lsn, lastLSN: lsn - 1, durableLSN: durable)
        guard lsn <= readable, let start = segments.lastIndex(where: { $0.firstLSN <= lsn }) else { return batch }
        if segments[start].isCompacted {
            throw CloudletError(
                .changeTokenExpired,
                "partition \(partition): LSN \(lsn) was compacted (generation \(segments[start].generation!) covers up to \(segments[start].lastLSN)); copy the segments instead of tailing")
        }
        /// Remembers where the frame after the batch starts, for `reader`'s next fetch from there. When 64 readers
        /// have places, the one that fetched longest ago loses its place.
        func hintNext(_ segment: UInt64, _ offset: UInt64) {
            monitor.withLock { s in
                if s.serveHints[reader] == nil, s.serveHints.count >= 64,
                    let oldest = s.serveHints.min(by: { $0.value.stamp < $1.value.stamp })?.key
                {
                    s.serveHints[oldest] = nil
                }
                s.serveHintClock += 1
                s.serveHints[reader] = (batch.lastLSN + 1, segment, offset, s.serveHintClock)
            }
        }
        var useHint = hint
        // Bytes are read forward in chunks of up to one batch (and a header): a follower tailing the leader gets its
        // frames in one read, not a read per header and per frame.
        let chunk = min(max(maxBytes, 0), 64 << 20) + FrameHeader.size
        for segment in segments[start...] where segment.lastLSN >= segment.firstLSN {
            var reader = SegmentReader(path: segment.path, size: segment.size, window: chunk) { [self] offset, count in
                try readSegment(segment.firstLSN, offset: offset, count: count, includingUnsynced: includingUnsynced)
            }
            // Frame by frame (durable bytes only, unless `includingUnsynced`); headers of the frames before `lsn` are
            // walked to skip them, from the segment's start or from where a hint says a frame at or before `lsn`
            // starts (the reader's place, else the start of a recently written run).
            var offset = UInt64(SegmentHeader.size)
            if let h = useHint, h.segment == segment.firstLSN, h.offset < segment.size,
                let at = try? reader.load(h.offset, count: FrameHeader.size),
                case .success(let header) = FrameHeader.check(reader.buffer, at: at, available: Int(clamping: segment.size - h.offset)),
                header.lsn == h.lsn
            {
                offset = h.offset
            }
            useHint = nil
            while offset < segment.size {
                let at = try reader.load(offset, count: FrameHeader.size)
                func corrupt(_ reason: String) -> CloudletError { .corruption(segment: segment.path, offset: offset, reason) }
                let header: FrameHeader
                switch FrameHeader.check(reader.buffer, at: at, available: Int(clamping: segment.size - offset)) {
                case .failure(let defect): throw corrupt(defect.reason)
                case .success(let h): header = h
                }
                defer { offset += UInt64(header.frameLength) }
                guard header.lsn >= lsn else { continue }
                if header.lsn > readable || (!batch.bytes.isEmpty && batch.bytes.count + header.frameLength > maxBytes) {
                    hintNext(segment.firstLSN, offset)
                    return batch
                }
                let start = try reader.load(offset, count: header.frameLength)
                if let defect = header.checkBody(reader.buffer, at: start) { throw corrupt(defect.reason) }
                guard header.lsn == batch.lastLSN + 1 else {
                    throw corrupt("frame has LSN \(header.lsn) where \(batch.lastLSN + 1) was expected")
                }
                batch.frames.append((header.lsn, header.epoch, batch.bytes.count..<(batch.bytes.count + header.frameLength)))
                batch.bytes.append(contentsOf: reader.buffer[start..<(start + header.frameLength)])
                batch.lastLSN = header.lsn
            }
        }
        // Everything durable was read: the next frame will start at the end of the last segment (or a new one).
        if let last = segments.last, batch.lastLSN >= lsn { hintNext(last.firstLSN, last.size) }
        return batch
    }
}
