import CloudletCore

/// The mutable state of a ``Log``, shared by the writers (``Log/stage(type:payload:)``), the committer thread,
/// the waiters and the readers. Lives in the log's ``Monitor``; never touched without its lock.
struct LogState {
    /// A run of staged bytes bound for one segment file, contiguous in the file and in ``pending``.
    struct Chunk {
        /// The segment it goes to.
        var segment: UInt64
        /// Where in the segment file it starts.
        var fileOffset: UInt64
        /// Where in the pending buffer it starts, and how long it is.
        var start: Int
        var count: Int
        /// The first frame of a new segment: the committer seals the current file and creates this one first.
        var createsSegment: Bool
        /// The LSN of its last frame.
        var lastLSN: UInt64
        /// The epoch of the frame that starts it: a new segment's header records it as its created epoch.
        var epoch: UInt64
    }

    /// A segment as written so far (what ``Log/segments()`` reports and ``Log/readFrame(at:)`` may read).
    struct Segment {
        var firstLSN: UInt64
        /// The LSN of its last frame; for a compacted segment, the last LSN it covers.
        var lastLSN: UInt64
        /// Bytes written, header included; frames below it are durable.
        var size: UInt64
        var sealed: Bool
        /// The file's path.
        var path: String
        /// The compaction generation of a compacted segment; nil for a regular one.
        var generation: UInt32? = nil
    }

    /// A segment's mapping and the file it maps.
    struct Mapping {
        var region: MappedRegion
        var path: String
        var used: UInt64
    }

    /// An `async` caller of ``Log/waitDurable(_:)``, or a callback of ``Log/whenDurable(_:_:)``.
    struct Waiter {
        enum Resumer {
            case task(CheckedContinuation<Void, any Error>)
            case callback(@Sendable (Result<Void, any Error>) -> Void)
        }
        var lsn: UInt64
        var resumer: Resumer
        /// Tells a cancelled waiter from the others (``Log/waitDurable(_:)``; 0 for callbacks).
        var id: UInt64

        /// Tells the waiter its LSN is durable (`.success`) or never will be. Call it outside the log's lock.
        func resume(_ outcome: Result<Void, any Error>) {
            switch resumer {
            case .task(let c): c.resume(with: outcome)
            case .callback(let f): f(outcome)
            }
        }
    }

    // Staging, advanced by stage().
    /// The last LSN staged (or recovered).
    var lastLSN: UInt64
    /// The segment the next frame goes to, and where in it.
    var stagingSegment: UInt64
    var stagingOffset: UInt64
    var stagingSegmentHasFrames: Bool
    /// Encoded frames staged and not yet taken by the committer, and where each run of them goes.
    var pending: [UInt8] = []
    var chunks: [Chunk] = []
    /// Bytes the committer took and has not finished writing.
    var inflightBytes = 0
    /// An emptied buffer the committer handed back, reused as the next ``pending`` to spare reallocations.
    var spare: [UInt8] = []

    // Epochs (fencing).
    /// The epoch ``Log/stage(type:payload:compressible:admitOverLimit:)`` stamps into frames.
    var epoch: UInt64
    /// The highest leader epoch seen: the log's last frame's, a verbatim append's leader epoch, or fenced. Staging
    /// under an older epoch and verbatim appends from an older leader are refused.
    var highestEpoch: UInt64
    /// Who decides, per frame staged, whether this node may write it and under which epoch (a replicated leader's
    /// driver); nil: the log writes ``epoch`` (``Log/setCommitGate(_:)``).
    var gate: (any LogCommitGate)?
    /// The epoch of the last frame staged (or recovered); frames never go back in epoch.
    var lastFrameEpoch: UInt64

    // Durability, advanced by the committer.
    var durableLSN: UInt64
    /// Frames the committer has written to their segment files (in the page cache, readable) but not yet fsynced:
    /// the last such LSN and, per segment the in-flight group wrote to, its last LSN and size as written. Cleared
    /// when the group is published durable (or the log fails). A leader serves them to its followers before its own
    /// fsync (``Log/frames(from:maxBytes:includingUnsynced:)``).
    var writtenLSN: UInt64 = 0
    var written: [UInt64: (lastLSN: UInt64, size: UInt64)] = [:]
    var segments: [Segment]
    var waiters: [Waiter] = []
    /// Set once, by the first failed write or fdatasync; the log is read-only from then on.
    var failure: CloudletError?
    /// Told of ``failure`` once, when it is set (``Log/onFailure(_:)``).
    var failureHandler: (@Sendable (CloudletError) -> Void)?
    /// Told the new durable LSN after each group commit, on the committer's thread (``Log/onDurable(_:)``).
    var durableHandler: (@Sendable (UInt64) -> Void)?
    var stats = LogStats()

    // Readers and lifecycle.
    /// Open segment files by id: the one being written, and sealed ones opened by readFrame.
    var files: [UInt64: any File] = [:]
    /// Segments mapped for reads (``Log/mapping(_:_:_:path:covering:)``), at most
    /// ``LogConfiguration/mappedSegments``; `used` is ``mapClock`` at the last read, for dropping the oldest.
    var mappings: [UInt64: Mapping] = [:]
    var mapClock: UInt64 = 0
    /// Segments whose file could not be mapped: read with `pread` from then on.
    var unmappable: Set<UInt64> = []
    /// readFrame calls between taking a file and finishing its pread; close() waits for them.
    var activeReads = 0
    var closing = false
    var closed = false

    // Compaction.
    /// The marker in force (nil before the first compaction).
    var marker: CompactionMarker?
    /// Compaction takes in no segment past this LSN (``LogConfiguration/boundedCompaction``; `.max`: no limit).
    var compactionLimit: UInt64 = .max
    /// The highest compaction generation used in the directory.
    var highestGeneration: UInt32 = 0
    /// Where ``Log/frames(from:maxBytes:includingUnsynced:reader:)`` stopped for each reader (a follower): the next
    /// LSN, and the segment and offset of its frame, so that the reader's next fetch from that LSN reads on from there
    /// instead of walking the segment's headers from its start. A hint is checked against the frame header it points
    /// at before it is used. Keyed by reader, so followers at any distance from each other (or fetching the same LSN)
    /// keep their own places; at most 64 are kept, past that the one used longest ago goes (by `stamp`, from
    /// ``serveHintClock``).
    var serveHints: [String: (lsn: UInt64, segment: UInt64, offset: UInt64, stamp: UInt64)] = [:]
    var serveHintClock: UInt64 = 0
    /// Where the frames of the groups written last start: the first LSN of each run the committer wrote, with its
    /// segment and offset, in LSN order (at most ``recentStartsLimit``, the oldest dropped in halves). A fetch that
    /// matches no reader's place — a follower re-fetching after a lost answer, one fetch overtaking another —
    /// reads on from the run at or before its LSN instead of walking the segment from its start.
    var recentStarts: [(lsn: UInt64, segment: UInt64, offset: UInt64)] = []
    static let recentStartsLimit = 8_192

    /// The entry of ``recentStarts`` with the highest LSN at or below `lsn`, if any.
    func recentStart(atOrBefore lsn: UInt64) -> (lsn: UInt64, segment: UInt64, offset: UInt64)? {
        var low = 0
        var high = recentStarts.count
        while low < high {
            let mid = (low + high) / 2
            if recentStarts[mid].lsn <= lsn { low = mid + 1 } else { high = mid }
        }
        return low > 0 ? recentStarts[low - 1] : nil
    }

    /// Records where the runs of a group the committer wrote start (`chunks`, following LSN `previous`).
    mutating func noteStarts(of chunks: [Chunk], after previous: UInt64) {
        var first = previous + 1
        for chunk in chunks where chunk.count > 0 {
            if let last = recentStarts.last, last.lsn >= first { recentStarts.removeAll() }
            recentStarts.append((first, chunk.segment, chunk.fileOffset))
            first = chunk.lastLSN + 1
        }
        if recentStarts.count > Self.recentStartsLimit { recentStarts.removeFirst(Self.recentStartsLimit / 2) }
    }
    /// Set while a compaction of this log is between ``Log/beginCompaction()`` and its install or abandonment.
    var compacting = false

    /// Makes `error` the log's failure unless it already failed; returns the handler to tell of it (outside the
    /// lock) when this is the first failure.
    mutating func fail(_ error: CloudletError) -> (@Sendable (CloudletError) -> Void)? {
        guard failure == nil else { return nil }
        failure = error
        return failureHandler
    }

    init(lastLSN: UInt64, segments: [Segment], epoch: UInt64, highestEpoch: UInt64) {
        self.lastLSN = lastLSN
        self.epoch = epoch
        self.highestEpoch = max(epoch, highestEpoch)
        self.lastFrameEpoch = highestEpoch
        self.durableLSN = lastLSN
        self.segments = segments
        let last = segments.last
        stagingSegment = last?.firstLSN ?? lastLSN + 1
        stagingOffset = last?.size ?? UInt64(SegmentHeader.size)
        stagingSegmentHasFrames = last.map { $0.lastLSN >= $0.firstLSN } ?? false
    }

    /// Stages a frame of `length` bytes with LSN `lsn` (the next one): decides whether it rolls into a new segment,
    /// lets `write` append its bytes to ``pending`` and records the run. Returns its position and whether the
    /// committer was idle (and must be woken).
    mutating func enqueue(
        lsn: UInt64, epoch: UInt64, length: Int, segmentSize: UInt64, write: (inout [UInt8]) -> Void
    ) -> (position: FramePosition, wasIdle: Bool) {
        precondition(lsn == lastLSN + 1, "LSN \(lsn) staged after \(lastLSN)")
        let rolls = stagingSegmentHasFrames && stagingOffset + UInt64(length) > segmentSize
        if rolls {
            stagingSegment = lsn
            stagingOffset = UInt64(SegmentHeader.size)
            stagingSegmentHasFrames = false
        }
        let position = FramePosition(segment: stagingSegment, offset: stagingOffset, length: UInt32(length))
        let wasIdle = chunks.isEmpty
        let start = pending.count
        write(&pending)
        precondition(pending.count == start + length, "a frame of \(length) bytes wrote \(pending.count - start)")
        if !rolls, let last = chunks.indices.last, chunks[last].segment == stagingSegment {
            chunks[last].count += length
            chunks[last].lastLSN = lsn
        } else {
            chunks.append(
                Chunk(
                    segment: stagingSegment, fileOffset: stagingOffset, start: start, count: length,
                    createsSegment: rolls, lastLSN: lsn, epoch: epoch))
        }
        lastLSN = lsn
        lastFrameEpoch = epoch
        stagingOffset += UInt64(length)
        stagingSegmentHasFrames = true
        stats.commits += 1
        return (position, wasIdle)
    }

    /// Staged bytes not yet written: what backpressure bounds.
    var unwrittenBytes: Int { pending.count + inflightBytes }

    /// The index of segment `id` in ``segments`` (binary search: they are sorted by first LSN).
    func segmentIndex(_ id: UInt64) -> Int? {
        var low = 0
        var high = segments.count
        while low < high {
            let mid = (low + high) / 2
            if segments[mid].firstLSN < id { low = mid + 1 } else { high = mid }
        }
        return low < segments.count && segments[low].firstLSN == id ? low : nil
    }
}
