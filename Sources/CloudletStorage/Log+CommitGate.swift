import CloudletCore

/// What a replicated log asks before it stages a frame of its own and before a writer may call that frame
/// committed: the replication driver of the node (CloudletCluster) implements it over its leader state.
///
/// ``admit(lsn:fence:)`` runs under the log's lock (keep it short, and never call back into the log from it).
public protocol LogCommitGate: AnyObject, Sendable {
    /// The frame about to be staged as `lsn`: returns the epoch to stamp into it (the leader's), or throws to refuse
    /// it (`SERVICE_UNAVAILABLE`: not the leader, or its lease could lapse). `fence` is the highest epoch the log has
    /// seen; an admitted epoch below it is refused by the log. Nothing may throw after an admission: the frame is
    /// staged.
    func admit(lsn: UInt64, fence: UInt64) throws -> UInt64
    /// Returns once frame `lsn` (durable here) is committed as the ack mode says (a quorum of replicas has it
    /// fsynced); throws `SERVICE_UNAVAILABLE` when its outcome became unknown (the leader stepped down first).
    func waitCommitted(_ lsn: UInt64) async throws
    /// ``waitCommitted(_:)`` for threads that may block.
    func waitCommittedBlocking(_ lsn: UInt64) throws
    /// The committer has written every frame up to `lsn` to the segment files and is about to fsync them: they can
    /// be read with ``Log/frames(from:maxBytes:includingUnsynced:)`` now. Called on the committer's thread, outside
    /// the log's lock, before the fsync (keep it short; never wait on the log from it).
    func framesWritten(through lsn: UInt64)
}

extension LogCommitGate {
    public func framesWritten(through lsn: UInt64) {}
}

extension Log {
    /// Puts `gate` in charge of this log's own frames (nil: stage under ``epoch``, acknowledge on fsync).
    public func setCommitGate(_ gate: (any LogCommitGate)?) {
        monitor.withLock { $0.gate = gate }
    }

    /// ``waitDurable(_:)``, then, for a replicated log, until the gate says `lsn` is committed: what a writer waits
    /// for before it acknowledges.
    public func waitCommitted(_ lsn: UInt64) async throws {
        try await waitDurable(lsn)
        if let gate = monitor.withLock({ $0.gate }) { try await gate.waitCommitted(lsn) }
    }

    /// ``waitCommitted(_:)`` for threads that may block (never on the cooperative pool).
    public func waitCommittedBlocking(_ lsn: UInt64) throws {
        try waitDurableBlocking(lsn)
        if let gate = monitor.withLock({ $0.gate }) { try gate.waitCommittedBlocking(lsn) }
    }
}
