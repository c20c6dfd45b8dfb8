import Synchronization

/// When a log's owner (a partition, the catalog) starts a background checkpoint: after `interval` bytes of log since
/// the last one started, never two at once; and the LSN of the newest checkpoint, so one is not written twice.
final class CheckpointTrigger: Sendable {
    private struct Progress {
        var bytes = 0
        var running = false
        var lastLSN: UInt64 = 0
    }

    private let progress = Mutex(Progress())
    let interval: Int

    init(interval: Int) { self.interval = interval }

    /// After opening: `bytes` of log replayed since the checkpoint of `lastLSN`.
    func reset(bytes: Int, lastLSN: UInt64) { progress.withLock { $0 = Progress(bytes: bytes, lastLSN: lastLSN) } }

    /// Counts `bytes` written; true when a checkpoint should start now — `interval` bytes were written since the
    /// last, or `force` (the caller's own reason: a full memtable) — and none is running (the caller calls
    /// ``finished()`` after it).
    func noteWritten(_ bytes: Int, force: Bool = false) -> Bool {
        progress.withLock { p in
            p.bytes += bytes
            guard p.bytes >= interval || force, !p.running else { return false }
            p.running = true
            p.bytes = 0
            return true
        }
    }

    /// The background checkpoint that ``noteWritten(_:)`` started is over.
    func finished() { progress.withLock { $0.running = false } }

    /// The LSN of the newest checkpoint written.
    var lastLSN: UInt64 { progress.withLock { $0.lastLSN } }

    /// A checkpoint of `lsn` was written.
    func wrote(_ lsn: UInt64) { progress.withLock { $0.lastLSN = max($0.lastLSN, lsn) } }
}
