import CloudletConcurrency
import CloudletCore
import Synchronization

/// The append-only log of one partition: segment files of checksummed, optionally LZ4-compressed frames, written
/// by group commit. Payloads are opaque bytes; the layer above decides what a frame means.
///
/// Writers ``stage(type:payload:)`` a frame (which assigns its LSN and position at once, without I/O) and then
/// ``waitDurable(_:)`` for it; one committer thread writes whatever is staged as one group and syncs it once.
/// The on-disk format and recovery rules: LogFormat.md next to this file.
///
/// Sendable: every stored property is immutable; the mutable state lives in `monitor`.
public final class Log: Sendable {
    /// The directory holding the segment files.
    public let directory: String
    /// The partition the log belongs to (stamped into every segment header).
    public let partition: UInt32
    public let configuration: LogConfiguration
    /// What opening the log found: frames replayed, a torn tail cut off.
    public let recovery: LogRecoveryReport

    let fileSystem: any FileSystem
    let monitor: Monitor<LogState>
    /// The compaction limit last stored in the `HORIZON` file; held while storing it, so that two writers (the
    /// replication layer, a compaction starting) neither share the temp file nor let an older value land last.
    let storedCompactionLimit: Mutex<UInt64>
    private let readCounter = Atomic<UInt64>(0)
    /// Numbers the async waiters, so that a cancelled one can be found (``waitDurable(_:)``).
    private let waiterIDs = Atomic<UInt64>(0)
    private let committer: Committer?
    private let thread: NativeThread?

    /// Opens or creates the log in `directory` (created if missing) for `partition`.
    ///
    /// Recovers: replays every valid frame with LSN > `afterLSN` (0 = all) in order through `replay`, starting at
    /// `startHint` (the position right after the frame `afterLSN`, from a checkpoint: ``FramePosition/next``) when
    /// it checks out, else scanning from the first segment. Truncates a torn tail of the last segment (unless
    /// read-only); throws `.corruption` naming the segment file and byte offset for a bad frame anywhere else, a
    /// missing segment, or a log that ends before `afterLSN`.
    public static func open(
        directory: String, partition: UInt32, configuration: LogConfiguration,
        fileSystem: any FileSystem = PosixFileSystem(), afterLSN: UInt64 = 0, startHint: FramePosition? = nil,
        replay: (Frame) throws -> Void
    ) throws -> Log {
        try validate(configuration)
        let directory = Path.normalize(directory)
        if !configuration.readOnly {
            do { try fileSystem.createDirectory(directory) } catch {
                throw CloudletError.io(error, "creating log directory \(directory)")
            }
        }
        let recovery = LogRecovery(
            directory: directory, fileSystem: fileSystem, partition: partition,
            mode: configuration.readOnly ? .inspect : .repair, epoch: configuration.epoch)
        var outcome = try recovery.run(afterLSN: afterLSN, startHint: startHint, replay: replay)
        // A log that is empty, or ends with a compacted segment (everything was compacted offline), gets a new
        // regular segment to append to, right after the last LSN it covers.
        if !configuration.readOnly && (outcome.segments.isEmpty || outcome.segments.last!.generation != nil) {
            let header = SegmentHeader(partition: partition, firstLSN: outcome.lastLSN + 1, epoch: configuration.epoch)
            do { outcome.lastFile = try header.createFile(in: directory, fileSystem: fileSystem) } catch {
                throw CloudletError.io(error, "creating segment \(header.firstLSN) of partition \(partition) in \(directory)")
            }
            outcome.segments.append(
                LogRecovery.Segment(
                    firstLSN: header.firstLSN, lastLSN: outcome.lastLSN, size: UInt64(SegmentHeader.size),
                    path: Path.join(directory, SegmentHeader.fileName(firstLSN: header.firstLSN))))
        }
        do {
            return try Log(
                directory: directory, partition: partition, configuration: configuration, fileSystem: fileSystem,
                outcome: outcome)
        } catch {
            try? outcome.lastFile?.close()
            throw error
        }
    }

    private static func validate(_ c: LogConfiguration) throws {
        guard c.segmentSize >= SegmentHeader.size + FrameHeader.size else {
            throw CloudletError.invalid("segmentSize \(c.segmentSize) is below the minimum of \(SegmentHeader.size + FrameHeader.size) bytes")
        }
        guard c.compressionThreshold >= 0 else {
            throw CloudletError.invalid("compressionThreshold \(c.compressionThreshold) is negative")
        }
        guard c.maxPendingBytes > 0 else { throw CloudletError.invalid("maxPendingBytes must be positive") }
        guard c.mappedSegments >= 0 else { throw CloudletError.invalid("mappedSegments \(c.mappedSegments) is negative") }
    }

    private init(
        directory: String, partition: UInt32, configuration: LogConfiguration, fileSystem: any FileSystem,
        outcome: LogRecovery.Outcome
    ) throws {
        self.directory = directory
        self.partition = partition
        self.configuration = configuration
        self.fileSystem = fileSystem
        self.recovery = outcome.report
        let segments = outcome.segments.enumerated().map { i, s in
            LogState.Segment(
                firstLSN: s.firstLSN, lastLSN: s.lastLSN, size: s.size,
                sealed: i < outcome.segments.count - 1 || s.generation != nil, path: s.path, generation: s.generation)
        }
        var state = LogState(
            lastLSN: outcome.lastLSN, segments: segments, epoch: configuration.epoch,
            highestEpoch: outcome.report.lastEpoch)
        state.marker = outcome.marker
        if configuration.boundedCompaction {
            state.compactionLimit = try CompactionHorizon.load(directory: directory, fileSystem: fileSystem)
        }
        storedCompactionLimit = Mutex(configuration.boundedCompaction ? state.compactionLimit : 0)
        state.highestGeneration = outcome.highestGeneration
        if let file = outcome.lastFile, let last = segments.last { state.files[last.firstLSN] = file }
        let monitor = Monitor(state)
        self.monitor = monitor
        if let file = outcome.lastFile, let last = segments.last {
            let committer = Committer(
                monitor: monitor, fileSystem: fileSystem, directory: directory, partition: partition,
                configuration: configuration, current: file, currentSegment: last.firstLSN)
            self.committer = committer
            thread = try NativeThread(name: "cloudlet-commit-\(partition)") { committer.run() }
        } else {
            committer = nil
            thread = nil
        }
    }

    deinit {
        try? close()
    }

    // MARK: Writing

    /// Assigns the next LSN and the frame's position, copies the encoded frame into the pending buffer and returns
    /// at once (no I/O; LZ4 and the checksum of the payload run before the lock is taken). Thread-safe; LSNs are
    /// dense and increase in call order.
    ///
    /// Blocks while ``LogConfiguration/maxPendingBytes`` are staged but unwritten — unless `admitOverLimit`: async
    /// callers wait for room with ``waitForRoom()`` before they stage (suspending, never blocking a thread of the
    /// cooperative pool), then stage even if others filled the room meanwhile, so the bound is then soft (exceeded
    /// by at most one frame per such writer). `type` 0 is reserved. A payload that is not `compressible` is stored as
    /// it is, so that the layer above can read part of it straight from the segment (``readStored(at:range:)``).
    /// Throws `.readOnly` when the log was opened read-only, after a failed write or fdatasync (the error of that
    /// failure), or once it is closed.
    public func stage(type: UInt8, payload: [UInt8], compressible: Bool = true, admitOverLimit: Bool = false) throws -> (
        lsn: UInt64, position: FramePosition
    ) {
        if configuration.readOnly {
            throw CloudletError(.readOnly, "the log of partition \(partition) in \(directory) is open read-only")
        }
        guard type != 0 else { throw CloudletError.invalid("frame type 0 is reserved (partition \(partition))") }
        guard payload.count <= FrameHeader.maxPayloadLength else {
            throw CloudletError(
                .limitExceeded, "a frame payload of \(payload.count) bytes exceeds \(FrameHeader.maxPayloadLength)")
        }
        let prepared = PreparedPayload(
            type: type, payload: payload, compressionThreshold: compressible ? configuration.compressionThreshold : .max)
        let length = prepared.frameLength
        let limit = configuration.maxPendingBytes
        if !admitOverLimit { ThreadBridge.checkMayBlock("staging a frame in partition \(partition)'s log (backpressure)") }
        let segmentSize = UInt64(configuration.segmentSize)
        let (staged, wasIdle) = try monitor.withLock(
            waitingOn: .progress,
            until: { s in
                admitOverLimit || s.failure != nil || s.closing || s.unwrittenBytes == 0 || s.unwrittenBytes + length <= limit
            }
        ) { s throws -> ((lsn: UInt64, position: FramePosition), Bool) in
            if let failure = s.failure { throw failure }
            if s.closing { throw closedError() }
            if let gate = s.gate {
                // A replicated log: the gate's leader admits the frame (or refuses it) and names its epoch.
                let epoch = try gate.admit(lsn: s.lastLSN + 1, fence: s.highestEpoch)
                s.epoch = epoch
                s.highestEpoch = max(s.highestEpoch, epoch)
            }
            let epoch = s.epoch
            if epoch < s.highestEpoch {
                throw CloudletError(
                    .serviceUnavailable,
                    "fenced: partition \(partition)'s log writes epoch \(epoch), but epoch \(s.highestEpoch) has been seen (a newer leader)")
            }
            let lsn = s.lastLSN + 1
            let (position, wasIdle) = s.enqueue(lsn: lsn, epoch: epoch, length: length, segmentSize: segmentSize) { pending in
                pending.append(contentsOf: prepared.header(lsn: lsn, epoch: epoch))
                pending.append(contentsOf: prepared.stored)
            }
            if prepared.isCompressed { s.stats.compressedFrames += 1 }
            return ((lsn, position), wasIdle)
        }
        if wasIdle { monitor.signal(.work) }
        return staged
    }

    /// Suspends while more than ``LogConfiguration/maxPendingBytes`` are staged but unwritten, until the committer has
    /// written what is staged now: the backpressure of ``stage(type:payload:compressible:admitOverLimit:)`` for
    /// async callers.
    public func waitForRoom() async throws {
        let limit = configuration.maxPendingBytes
        guard let last = monitor.withLock({ s in s.unwrittenBytes < limit ? nil : s.lastLSN }) else { return }
        try await waitDurable(last)
    }

    /// Returns when `lsn` is written (and fdatasync'd under ``Durability/fsync``), suspending meanwhile. Throws the
    /// log's failure if it failed before that, `.invalidArguments` for an LSN never staged, `CancellationError` if
    /// the task is cancelled first — which stops the wait, not the write: the frame still becomes durable.
    public func waitDurable(_ lsn: UInt64) async throws {
        if try monitor.withLock({ try isDurable(lsn, $0) }) { return }
        let id = waiterIDs.add(1, ordering: .relaxed).newValue
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = monitor.withLock { s -> Result<Void, any Error>? in
                    if let settled = settled(lsn, s) { return settled }
                    // Checked under the lock that the cancellation handler takes, after the task's flag is set: a
                    // cancellation either finds the waiter registered or keeps it from registering.
                    if Task.isCancelled { return .failure(CancellationError()) }
                    s.waiters.append(LogState.Waiter(lsn: lsn, resumer: .task(continuation), id: id))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let cancelled = monitor.withLock { s -> LogState.Waiter? in
                guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.waiters.remove(at: i)
            }
            cancelled?.resume(.failure(CancellationError()))
        }
    }

    /// Calls `callback` once `lsn` is durable (`.success`) or never will be (the log's failure, a closed log, an LSN
    /// never staged): right away on this thread if that is known now, else on the committer's thread after the
    /// fdatasync that makes it durable (keep it short: resuming a task). ``waitDurable(_:)`` without a task
    /// suspended on it — for a writer that hands its caller's continuation over (`PartitionWriter.run(_:deliver:)`),
    /// so that the task wakes once, when its commit is durable. Not cancellable.
    public func whenDurable(_ lsn: UInt64, _ callback: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let now = monitor.withLock { s -> Result<Void, any Error>? in
            if let settled = settled(lsn, s) { return settled }
            s.waiters.append(LogState.Waiter(lsn: lsn, resumer: .callback(callback), id: 0))
            return nil
        }
        if let now { callback(now) }
    }

    /// What a waiter for `lsn` would be told now (``isDurable(_:_:)`` as an outcome), nil while it must wait.
    private func settled(_ lsn: UInt64, _ s: LogState) -> Result<Void, any Error>? {
        do {
            return try isDurable(lsn, s) ? .success(()) : nil
        } catch {
            return .failure(error)
        }
    }

    /// ``waitDurable(_:)`` for threads that may block (never call it on the cooperative pool).
    public func waitDurableBlocking(_ lsn: UInt64) throws {
        ThreadBridge.checkMayBlock("waiting for LSN \(lsn) of partition \(partition) to be durable")
        try monitor.withLock(
            waitingOn: .progress,
            until: { s in s.durableLSN >= lsn || s.failure != nil || lsn > s.lastLSN || s.closed }
        ) { s in _ = try isDurable(lsn, s) }
    }

    /// Whether `lsn` is durable; throws if it never will be.
    private func isDurable(_ lsn: UInt64, _ s: LogState) throws -> Bool {
        if s.durableLSN >= lsn { return true }
        if let failure = s.failure { throw failure }
        if lsn > s.lastLSN {
            throw CloudletError.invalid("LSN \(lsn) of partition \(partition) was never staged (the last is \(s.lastLSN))")
        }
        if s.closed { throw closedError() }
        return false
    }

    /// Waits until everything staged so far is durable.
    public func flush() throws {
        try waitDurableBlocking(monitor.withLock { $0.lastLSN })
    }

    private func closedError() -> CloudletError {
        CloudletError(.readOnly, "the log of partition \(partition) in \(directory) is closed")
    }

    // MARK: State

    /// The highest LSN that is durable: every frame up to it survives a crash.
    public var durableLSN: UInt64 { monitor.withLock { $0.durableLSN } }
    /// The last LSN staged (or recovered).
    public var lastLSN: UInt64 { monitor.withLock { $0.lastLSN } }
    /// The leader epoch stamped into new frames: ``LogConfiguration/epoch`` until ``lead(epoch:)`` changes it.
    public var epoch: UInt64 { monitor.withLock { $0.epoch } }
    public var stats: LogStats { monitor.withLock { $0.stats } }
    /// Set once the log went read-only after a failed write or fdatasync.
    public var failure: CloudletError? { monitor.withLock { $0.failure } }

    /// Calls `handler` once with the log's failure when it fails — at once if it already has — on the thread that
    /// saw it fail (the committer's, mostly): the owner's way to report a failure no caller may be waiting for.
    /// Replaces an earlier handler.
    public func onFailure(_ handler: @escaping @Sendable (CloudletError) -> Void) {
        let failed = monitor.withLock { s -> CloudletError? in
            s.failureHandler = handler
            return s.failure
        }
        if let failed { handler(failed) }
    }

    /// Calls `handler` with the durable LSN after each group commit, on the committer's thread, once the waiters
    /// are resumed — but not while a commit gate is set (a replicated log: durable here is not committed). For
    /// listeners that must not depend on a waiter's task running again (the notification hub). `handler` must be
    /// short and must not block. Replaces an earlier handler.
    public func onDurable(_ handler: @escaping @Sendable (UInt64) -> Void) {
        monitor.withLock { $0.durableHandler = handler }
    }

    /// Whether a commit gate is set (``setCommitGate(_:)``).
    public var hasCommitGate: Bool { monitor.withLock { $0.gate != nil } }

    /// Makes the log read-only with `failure`, as a failed write would: its owner's state could not follow a frame
    /// it staged, so nothing more may be written on top of it. Waiters get the failure; reopening replays the log.
    public func fail(_ failure: CloudletError) { committer?.fail(failure) }

    /// The segment files written so far, oldest first.
    public func segments() -> [SegmentInfo] {
        monitor.withLock { s in
            s.segments.map {
                SegmentInfo(
                    path: $0.path, firstLSN: $0.firstLSN, lastLSN: $0.lastLSN, size: $0.size, sealed: $0.sealed,
                    generation: $0.generation)
            }
        }
    }

    /// The position right after the last frame staged: where the next frame goes (length 0).
    public var endPosition: FramePosition {
        monitor.withLock { s in FramePosition(segment: s.stagingSegment, offset: s.stagingOffset, length: 0) }
    }

    /// The compaction marker in force: nil until a compaction took effect.
    public var compactionMarker: CompactionMarker? { monitor.withLock { $0.marker } }

    // MARK: Reading

    /// Reads the frame at `position` with one `pread`, checks its checksum and decompresses it. Throws
    /// `.corruption` naming the segment file and offset on any mismatch, `.invalidArguments` for a position that
    /// is not inside the durable part of a segment.
    public func readFrame(at position: FramePosition) throws -> Frame {
        guard position.length >= UInt32(FrameHeader.size) else {
            throw CloudletError.invalid("position \(position) is shorter than a frame header")
        }
        let (bytes, path) = try read(segment: position.segment, offset: position.offset, count: Int(position.length))
        func corrupt(_ what: String) -> CloudletError { .corruption(segment: path, offset: position.offset, what) }
        let header: FrameHeader
        switch FrameHeader.check(bytes, at: 0, available: bytes.count) {
        case .failure(let defect): throw corrupt(defect.reason)
        case .success(let h): header = h
        }
        guard header.frameLength == Int(position.length) else {
            throw corrupt("the frame is \(header.frameLength) bytes, the position says \(position.length)")
        }
        if let defect = header.checkBody(bytes, at: 0) { throw corrupt(defect.reason) }
        switch header.payload(bytes, at: 0) {
        case .failure(let defect): throw corrupt(defect.reason)
        case .success(let payload):
            return Frame(
                lsn: header.lsn, epoch: header.epoch, type: header.type, flags: header.flags, payload: payload,
                position: position)
        }
    }

    /// Bytes read from segments by ``readFrame(at:)``, ``readStored(at:range:)`` and ``readSegment(_:offset:count:)``
    /// since the log was opened (recovery's reads not included).
    public var bytesRead: UInt64 { readCounter.load(ordering: .relaxed) }

    /// Segments mapped for reads now (at most ``LogConfiguration/mappedSegments``).
    public var mappedSegmentCount: Int { monitor.withLock { $0.mappings.count } }

    /// Reads `range` of the payload of the frame at `position` as it is stored, with one `pread` and no check of the
    /// frame: for payloads staged uncompressed whose parts carry checksums of their own (record blocks), so that a
    /// point read costs those bytes and not the frame's. Throws `.invalidArguments` for a range outside the frame
    /// or the segment's durable bytes.
    public func readStored(at position: FramePosition, range: Range<Int>) throws -> [UInt8] {
        guard range.lowerBound >= 0, FrameHeader.size + range.upperBound <= Int(position.length) else {
            throw CloudletError.invalid("payload bytes \(range) are outside the frame at \(position)")
        }
        return try read(
            segment: position.segment, offset: position.offset + UInt64(FrameHeader.size + range.lowerBound),
            count: range.count
        ).bytes
    }

    /// Reads `count` durable bytes of a segment at `offset` (frames and parts of frames; the caller checks them) —
    /// with `includingUnsynced`, also bytes written and not yet fsynced (a leader's frames in flight to its followers).
    public func readSegment(_ segment: UInt64, offset: UInt64, count: Int, includingUnsynced: Bool = false) throws -> [UInt8] {
        try read(segment: segment, offset: offset, count: count, includingUnsynced: includingUnsynced).bytes
    }

    /// One positioned read of durable bytes of a segment (or written ones, `includingUnsynced`), its file opened
    /// once and kept; returns them and the path. A copy out of the segment's mapping where it is mapped
    /// (``LogConfiguration/mappedSegments``), else a `pread`.
    private func read(
        segment: UInt64, offset: UInt64, count: Int, includingUnsynced: Bool = false
    ) throws -> (bytes: [UInt8], path: String) {
        ThreadBridge.checkMayBlock("reading segment \(segment) of partition \(partition)")
        enum Source {
            case mapped(MappedRegion)
            case file(any File)
        }
        let (source, path) = try monitor.withLock { s throws -> (Source, String) in
            if s.closing { throw closedError() }
            guard let i = s.segmentIndex(segment) else {
                throw CloudletError.invalid(
                    "segment \(segment) offset \(offset): partition \(partition) has no such segment in \(directory)")
            }
            let path = s.segments[i].path
            let size = max(s.segments[i].size, includingUnsynced ? s.written[segment]?.size ?? 0 : 0)
            guard offset >= UInt64(SegmentHeader.size), count >= 0, offset + UInt64(count) <= size else {
                throw CloudletError.invalid(
                    "bytes \(offset)..<\(offset + UInt64(max(count, 0))) are not inside the \(size) "
                        + "\(includingUnsynced ? "written" : "durable") bytes of segment \(path)")
            }
            let file: any File
            if let open = s.files[segment] {
                file = open
            } else {
                do throws(FileSystemError) { file = try fileSystem.open(path, options: .readOnly) } catch {
                    throw CloudletError.io(error, "opening segment \(path)")
                }
                s.files[segment] = file
            }
            if let region = mapping(&s, segment, file, path: path, covering: offset + UInt64(count)) {
                return (.mapped(region), path)
            }
            s.activeReads += 1
            return (.file(file), path)
        }
        let bytes: [UInt8]
        switch source {
        case .mapped(let region):
            bytes = region.bytes(at: Int(offset), count: count)
        case .file(let file):
            defer {
                let last = monitor.withLock { s in
                    s.activeReads -= 1
                    return s.activeReads == 0 && s.closing
                }
                if last { monitor.broadcast(.progress) }
            }
            do throws(FileSystemError) { bytes = try file.read(at: offset, count: count) } catch {
                throw CloudletError.io(error, "reading segment \(path) at offset \(offset)")
            }
        }
        readCounter.add(UInt64(bytes.count), ordering: .relaxed)
        guard bytes.count == count else {
            throw CloudletError.corruption(
                segment: path, offset: offset, "\(bytes.count) bytes where \(count) were expected (the file ends)")
        }
        return (bytes, path)
    }

    /// The mapping of `segment` (whose file is `file`) if it covers its first `end` bytes, mapped now if needed
    /// (``LogConfiguration/segmentSize`` at least, so that the segment being written is not remapped as it grows);
    /// nil where nothing is mapped (``LogConfiguration/mappedSegments`` 0, a file system that cannot map). Past the
    /// bound, the mapping read least recently is dropped (a reader holding it finishes first: it is unmapped with
    /// its last reference). Under the lock.
    private func mapping(
        _ s: inout LogState, _ segment: UInt64, _ file: any File, path: String, covering end: UInt64
    ) -> MappedRegion? {
        guard configuration.mappedSegments > 0, !s.unmappable.contains(segment) else { return nil }
        s.mapClock += 1
        if let m = s.mappings[segment], m.path == path, UInt64(m.region.count) >= end {
            s.mappings[segment]!.used = s.mapClock
            return m.region
        }
        guard let region = file.mapReadOnly(count: max(Int(end), configuration.segmentSize)) else {
            s.unmappable.insert(segment)
            return nil
        }
        if s.mappings[segment] == nil, s.mappings.count >= configuration.mappedSegments,
            let oldest = s.mappings.min(by: { $0.value.used < $1.value.used })?.key
        {
            s.mappings[oldest] = nil
        }
        s.mappings[segment] = LogState.Mapping(region: region, path: path, used: s.mapClock)
        return region
    }

    // MARK: Closing

    /// Writes and syncs everything staged, stops the committer thread and closes the files. Idempotent (a
    /// concurrent second call waits for the first). Throws the log's failure if it failed at any time.
    public func close() throws {
        enum Step { case close, wait, done }
        let step = monitor.withLock { s -> Step in
            if s.closed { return .done }
            if s.closing { return .wait }
            s.closing = true
            return .close
        }
        switch step {
        case .done: return
        case .wait:
            monitor.withLock(waitingOn: .progress, until: { $0.closed }) { _ in }
            return
        case .close: break
        }
        monitor.broadcast(.work)
        monitor.broadcast(.progress)
        thread?.join()
        if let committer, monitor.withLock({ $0.failure == nil }) {
            do throws(FileSystemError) { try committer.syncOnClose() } catch { committer.fail(error) }
        }
        let files = monitor.withLock(waitingOn: .progress, until: { $0.activeReads == 0 }) { s in
            let files = s.files
            s.files = [:]
            s.mappings = [:]
            return files
        }
        // Everything was synced above; an error closing a descriptor can lose nothing more.
        for file in files.values { try? file.close() }
        let (failure, waiters) = monitor.withLock { s in
            s.closed = true
            let waiters = s.waiters
            s.waiters = []
            return (s.failure, waiters)
        }
        monitor.broadcast(.progress)
        for waiter in waiters { waiter.resume(.failure(failure ?? closedError())) }
        if let failure { throw failure }
    }
}
