import CloudletCore
import CloudletStorage
import Dispatch
import Foundation
import Synchronization

/// What one compaction of a partition did.
public struct CompactionReport: Sendable, Hashable {
    public var partition: Int
    /// The generation it wrote (the `-g<n>` of the new segment files).
    public var generation: UInt32
    /// The segments it replaced, and their bytes.
    public var segmentsBefore: Int
    public var bytesBefore: UInt64
    /// The segments it wrote, and their bytes.
    public var segmentsAfter: Int
    public var bytesAfter: UInt64
    /// Frames read, dropped (nothing live), copied as they were, and rewritten with only their live mutations.
    public var framesRead: Int
    public var framesDropped: Int
    public var framesCopied: Int
    public var framesRewritten: Int
    /// How long writers were held while the new segments were swapped in, in microseconds.
    public var pauseMicroseconds: Int

    /// Bytes the compaction gave back.
    public var bytesReclaimed: UInt64 { bytesBefore > bytesAfter ? bytesBefore - bytesAfter : 0 }
}

/// Where a running compaction is.
public struct CompactionProgress: Sendable, Hashable {
    public var partition: Int
    /// Input bytes read so far, and in all.
    public var bytesDone: UInt64
    public var bytesTotal: UInt64
}

/// Online compaction of one partition: whether one runs, its progress, the counters the store's statistics show.
///
/// Sendable: the mutable state is in a `Mutex`; `idle` is a semaphore-like group closing waits on.
final class CompactionControl: Sendable {
    struct State {
        var running = false
        var cancelled = false
        var bytesDone: UInt64 = 0
        var bytesTotal: UInt64 = 0
        var compactions = 0
        var bytesReclaimed: UInt64 = 0
        var lastPauseMicroseconds = 0
        var maxPauseMicroseconds = 0
        var lastError: String?
        /// Log bytes written since the thresholds were last checked.
        var bytesSinceCheck = 0
    }

    let configuration: CompactionConfiguration
    let state = Mutex(State())
    private let idle = DispatchGroup()

    init(configuration: CompactionConfiguration) { self.configuration = configuration }

    /// Marks a compaction as running; false if one already is or the partition is closing.
    func begin() -> Bool {
        let ok = state.withLock { s -> Bool in
            guard !s.running, !s.cancelled else { return false }
            s.running = true
            s.bytesDone = 0
            s.bytesTotal = 0
            return true
        }
        if ok { idle.enter() }
        return ok
    }

    func end(_ report: CompactionReport?, error: (any Error)?) {
        state.withLock { s in
            s.running = false
            if let report {
                s.compactions += 1
                s.bytesReclaimed += report.bytesReclaimed
                s.lastPauseMicroseconds = report.pauseMicroseconds
                s.maxPauseMicroseconds = max(s.maxPauseMicroseconds, report.pauseMicroseconds)
                s.lastError = nil
            }
            if let error { s.lastError = "\(error)" }
        }
        idle.leave()
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Waits until no compaction runs (one may start right after).
    func waitIdle() { idle.wait() }

    /// Stops a running compaction (it abandons its work at the next frame) and waits for it; no new one starts.
    func cancelAndWait() {
        state.withLock { $0.cancelled = true }
        idle.wait()
    }
}

/// Sleeps as needed to keep a byte stream under a rate.
struct RateLimiter {
    let bytesPerSecond: Int
    private let start = DispatchTime.now().uptimeNanoseconds
    private var bytes: UInt64 = 0

    init(bytesPerSecond: Int) { self.bytesPerSecond = bytesPerSecond }

    mutating func consume(_ n: Int) {
        guard bytesPerSecond > 0 else { return }
        bytes += UInt64(n)
        let due = bytes * 1_000_000_000 / UInt64(bytesPerSecond)
        let elapsed = DispatchTime.now().uptimeNanoseconds - start
        if due > elapsed + 1_000_000 { usleep(useconds_t(min((due - elapsed) / 1000, 1_000_000))) }
    }
}

extension Partition {
    /// Compacts every sealed segment (with `includeActiveSegment`, the segment being written too, rolled first):
    /// purges tombstones past the retention window, copies the live frames into segments of a new generation off
    /// the writer lock at most `bytesPerSecond` (nil: the configured rate; 0: unlimited), writes the marker, then
    /// swaps the new segments in under the writer lock and writes a checkpoint. Blocking. Returns nil when there
    /// was nothing to compact. With `waitForRunning`, waits for a compaction under way (the background one) to end
    /// first, and throws `.invalidArguments` if the partition is closing; without it (the background trigger), a
    /// compaction under way or a closing partition means there is nothing to do here: returns nil.
    func compact(
        includeActiveSegment: Bool = false, bytesPerSecond: Int? = nil, waitForRunning: Bool = false,
        progress: ((CompactionProgress) -> Void)? = nil
    ) throws -> CompactionReport? {
        while !compaction.begin() {
            guard waitForRunning else { return nil }
            guard !compaction.isCancelled else { throw CloudletError.invalid("partition \(id) is closing") }
            compaction.waitIdle()
        }
        do {
            let report = try compactLocked(
                includeActiveSegment: includeActiveSegment,
                bytesPerSecond: bytesPerSecond ?? compaction.configuration.bytesPerSecond, progress: progress)
            compaction.end(report, error: nil)
            return report
        } catch {
            compaction.end(nil, error: error)
            throw error
        }
    }

    private func compactLocked(
        includeActiveSegment: Bool, bytesPerSecond: Int, progress: ((CompactionProgress) -> Void)?
    ) throws -> CompactionReport? {
        // Tombstones past retention go first, so that compaction drops them — except in a cluster replica's log
        // (bounded compaction): a purge is a commit, which only the leader may write (its purges reach the replicas
        // through the log); one written here, by a follower or offline, would be a frame no other replica has.
        if log.compactionLimit == .max {
            try purgeTombstones(olderThan: Int64((Date().timeIntervalSince1970 - tombstoneRetention) * 1000))
        }
        if includeActiveSegment { try log.roll() }
        guard let writer = try log.beginCompaction() else { return nil }
        var installed = false
        defer { if !installed { log.abandonCompaction(writer) } }
        let total = writer.inputs.reduce(UInt64(0)) { $0 + $1.size }
        compaction.state.withLock { $0.bytesTotal = total }

        var report = CompactionReport(
            partition: Int(id), generation: writer.generation, segmentsBefore: writer.inputs.count, bytesBefore: total,
            segmentsAfter: 0, bytesAfter: 0, framesRead: 0, framesDropped: 0, framesCopied: 0, framesRewritten: 0,
            pauseMicroseconds: 0)
        let moves = try copyLiveFrames(
            into: writer, report: &report, total: total, bytesPerSecond: bytesPerSecond, progress: progress)
        try writer.finish()
        CrashPoint.reached("compaction.finished")
        report.segmentsAfter = writer.segments.count
        report.bytesAfter = writer.segments.reduce(0) { $0 + $1.size }

        // The commit point; then the swap, which holds the writers only for memory work.
        try log.writeCompactionMarker(writer)
        installed = true
        let started = DispatchTime.now().uptimeNanoseconds
        let replaced = try state.withLock { st -> [String] in
            entryCache.removeAll()  // the versions moved
            let replaced = log.swapInCompaction(writer)
            do {
                try moves.apply(to: &st, coveredThrough: writer.coveredThrough, generation: writer.generation)
            } catch {
                // The log moved on but the state could not follow (its index could not be read): stop writes; the
                // next open rebuilds the index from the compacted log (its flush is of the old generation).
                log.fail(CloudletError(.readOnly, "partition \(id): compaction's swap failed: \(error)", cause: error))
                throw error
            }
            if (st.nextPosition?.segment ?? 0) <= writer.coveredThrough { st.nextPosition = log.endPosition }
            return replaced
        }
        report.pauseMicroseconds = Int((DispatchTime.now().uptimeNanoseconds - started) / 1000)
        CrashPoint.reached("compaction.swapped")
        // The compaction took effect; files left behind are removed by the next open, but not silently.
        do { try log.removeSegmentFiles(replaced) } catch { backgroundErrors.record(.compaction, in: "partition \(id)", error) }
        CrashPoint.reached("compaction.removed")
        // Checkpoints of the old generation point at frames that no longer exist: replace them.
        try flushIndex(force: true)
        // A full compaction (the offline tool's) leaves the index as small as it can be too.
        if includeActiveSegment, let index {
            try index.mergeAll()
            state.withLock { $0.rebaseDirectory(index.runsView()) }
        }
        return report
    }

    /// Reads the inputs in order and writes what is live at a snapshot of the state; returns where it all went.
    private func copyLiveFrames(
        into writer: CompactionWriter, report: inout CompactionReport, total: UInt64, bytesPerSecond: Int,
        progress: ((CompactionProgress) -> Void)?
    ) throws -> CompactionMoves {
        // Everything in the inputs is applied (staging applies before a segment can seal), so a read view decides
        // every frame; what changes after it is sorted out at the swap.
        let snapshot = state.withLock { $0.readView }
        var moves = CompactionMoves()
        var limiter = RateLimiter(bytesPerSecond: bytesPerSecond)
        var done: UInt64 = 0
        var reported: UInt64 = 0
        for input in writer.inputs {
            var reader = try SegmentFrameReader(input, fileSystem: fileSystem)
            while let frame = try reader.next() {
                if compaction.isCancelled {
                    throw CloudletError(.readOnly, "the compaction of partition \(id) was cancelled: the store is closing")
                }
                report.framesRead += 1
                writer.note(lsn: frame.lsn, epoch: frame.epoch)
                let plan = try FrameCompaction(frame, state: snapshot)
                switch plan.action {
                case .drop:
                    report.framesDropped += 1
                case .copy:
                    report.framesCopied += 1
                    let position = try writer.appendCopy(of: frame)
                    moves.note(plan.outline.entries, of: plan.outline, lsn: frame.lsn, position: position, costs: plan.costs)
                case .rewrite(let payload, let kept):
                    report.framesRewritten += 1
                    // A version-2 payload: stored as it is, its record blocks read in place.
                    let position = try writer.append(
                        lsn: frame.lsn, epoch: frame.epoch, type: frame.type, payload: payload, compressible: false)
                    let sizes = kept.map { UInt32($0.range.count) }
                    moves.note(
                        kept, of: plan.outline, lsn: frame.lsn, position: position,
                        costs: Commit.costs(sizes: sizes, frameLength: position.length))
                }
                done += UInt64(frame.position.length)
                CrashPoint.reached("compaction.frame")
                limiter.consume(Int(frame.position.length))
                if done - reported >= 1 << 20 {
                    reported = done
                    compaction.state.withLock { $0.bytesDone = done }
                    progress?(CompactionProgress(partition: Int(id), bytesDone: done, bytesTotal: total))
                }
            }
        }
        compaction.state.withLock { $0.bytesDone = total }
        progress?(CompactionProgress(partition: Int(id), bytesDone: total, bytesTotal: total))
        return moves
    }

    /// The dead bytes of the sealed segments and their total size.
    package func deadBytes() -> (dead: UInt64, sealed: UInt64) {
        let segments = log.segments().filter(\.sealed)
        let live = state.withLock { st in segments.reduce(Int64(0)) { $0 + (st.segmentLive[$1.firstLSN] ?? 0) } }
        let sealed = segments.reduce(UInt64(0)) { $0 + $1.size }
        let dead = Int64(sealed) - live
        return (dead > 0 ? UInt64(dead) : 0, sealed)
    }

    /// After `bytes` more of log: when the thresholds are met, starts a compaction in the background.
    func maybeCompact(after bytes: Int) {
        let config = compaction.configuration
        guard config.automatic else { return }
        let check = compaction.state.withLock { s -> Bool in
            s.bytesSinceCheck += bytes
            guard !s.running, !s.cancelled, s.bytesSinceCheck >= min(1 << 20, max(4096, config.minDeadBytes / 16))
            else { return false }
            s.bytesSinceCheck = 0
            return true
        }
        guard check else { return }
        let (dead, sealed) = deadBytes()
        guard sealed > 0, dead >= UInt64(max(config.minDeadBytes, 1)), Double(dead) >= config.minDeadRatio * Double(sealed)
        else { return }
        DispatchQueue.global(qos: .utility).async { [self] in compactInBackground() }
    }

    /// The background compaction ``maybeCompact(after:)`` starts: its failure is reported (``BackgroundErrors``).
    func compactInBackground() {
        inBackground(.compaction) { _ = try compact() }
    }
}
