import CloudletReplication
import Testing

private let n1 = NodeID("n1")
private let n2 = NodeID("n2")
private let n3 = NodeID("n3")

/// A replica of a 3-replica partition, started with frames of `epochs` (one per LSN) and holding lease 7 granted
/// at time 0 (TTL 1 000 ms, skew margin 200 ms: safe until 800 ms).
private func replica(_ node: NodeID, ack: AckMode = .quorum, epochs: [UInt64] = []) -> Replica {
    var c = ReplicaConfiguration(node: node, replicas: [n1, n2, n3])
    c.ackMode = ack
    c.leaseTTL = 1_000
    c.renewInterval = 200
    c.clockSkewMargin = 200
    var r = Replica(configuration: c)
    var history = EpochHistory()
    for (i, e) in epochs.enumerated() { history.record(epoch: e, at: UInt64(i + 1)) }
    _ = r.on(.start(now: 0, lastLSN: UInt64(epochs.count), history: history))
    _ = r.on(.leaseGranted(lease: 7, sentAt: 0))
    return r
}

/// n1 as leader of epoch 5 (won the key, n2 answered the fence with an empty log).
private func leader(ack: AckMode = .quorum) -> Replica {
    var r = replica(n1, ack: ack)
    _ = r.on(.campaignResult(epoch: 5))
    _ = r.on(.message(n2, .fenced(epoch: 5, end: .empty)))
    return r
}

extension ReplicaEvent {
    /// A message from `node`, at 10 ms (later events' clocks stay: a replica's clock never goes back).
    static func message(_ node: NodeID, _ message: ReplicaMessage) -> ReplicaEvent { .receive(from: node, message, now: 10) }
}

private func frame(_ lsn: UInt64, _ epoch: UInt64) -> ReplicatedFrame {
    ReplicatedFrame(lsn: lsn, epoch: epoch, payload: [UInt8(lsn)])
}

private func acknowledged(_ actions: [ReplicaAction]) -> [UInt64] {
    actions.flatMap { action -> [UInt64] in
        if case .acknowledge(let ids) = action { return ids }
        return []
    }
}

@Suite("Replica: the replication state machine, event by event")
struct ReplicaTests {
    @Test("winning the leader key fences the other replicas; a majority of answers makes a leader")
    func election() {
        var r = replica(n1)
        let actions = r.on(.campaignResult(epoch: 5))
        #expect(actions.contains(.fence(epoch: 5)))
        #expect(actions.contains(.send(to: n2, .fence(epoch: 5))) && actions.contains(.send(to: n3, .fence(epoch: 5))))
        #expect(r.role == .candidate(epoch: 5))
        _ = r.on(.message(n3, .fenced(epoch: 5, end: .empty)))
        #expect(r.role == .leader(epoch: 5))
    }

    @Test("--ack quorum acknowledges only once a follower's fetch reports the frame fsynced")
    func quorumAck() {
        var r = leader()
        #expect(r.on(.write(id: 41, payload: [1], now: 10)) == [.append([ReplicatedFrame(lsn: 1, epoch: 5, payload: [1])])])
        #expect(acknowledged(r.on(.durable(lsn: 1, now: 10))).isEmpty)
        // A fetch that has the frame but not fsynced yet does not count.
        #expect(acknowledged(r.on(.message(n2, .fetch(epoch: 5, from: 2, previousEpoch: 5, durable: 0)))).isEmpty)
        #expect(acknowledged(r.on(.message(n2, .fetch(epoch: 5, from: 2, previousEpoch: 5, durable: 1)))) == [41])
    }

    @Test("frames already sent from an LSN are not sent again when the follower reports its fsync, only after a retry interval")
    func noSecondCopy() {
        var r = leader()
        for id in 1...3 as ClosedRange<UInt64> { _ = r.on(.write(id: id, payload: [UInt8(id)], now: 10)) }
        _ = r.on(.durable(lsn: 3, now: 10))
        func served(_ actions: [ReplicaAction]) -> Bool {
            actions.contains { if case .serveFrames = $0 { return true } else { return false } }
        }
        // The follower fetches ahead as the frames arrive, then reports its fsync from the same LSN.
        #expect(served(r.on(.receive(from: n2, .fetch(epoch: 5, from: 1, previousEpoch: 0, durable: 0), now: 20))))
        let report = r.on(.receive(from: n2, .fetch(epoch: 5, from: 1, previousEpoch: 0, durable: 0), now: 30))
        #expect(!served(report))
        // Progress still counts: a fetch further on acknowledges, and is served.
        let next = r.on(.receive(from: n2, .fetch(epoch: 5, from: 3, previousEpoch: 5, durable: 2), now: 40))
        #expect(acknowledged(next) == [1, 2] && served(next))
        // A fetch from where frames were sent, a retry interval later (they may have been lost), gets them again.
        #expect(served(r.on(.receive(from: n2, .fetch(epoch: 5, from: 3, previousEpoch: 5, durable: 2), now: 40 + 500))))
    }

    @Test("a leader serves a parked fetch once its frames are written, before its own fsync; a fenced replica serves only fsynced frames")
    func servesBeforeFsync() {
        var r = leader()
        _ = r.on(.write(id: 41, payload: [1], now: 10))
        // The follower's fetch parks: nothing is written yet.
        #expect(r.on(.message(n2, .fetch(epoch: 5, from: 1, previousEpoch: 0, durable: 0))).isEmpty)
        let served = r.on(.written(lsn: 1, now: 10))
        #expect(served == [.serveFrames(to: n2, epoch: 5, previousEpoch: 0, from: 1, through: 1, horizon: 0)])
        #expect(r.durableLSN == 0 && r.servableLSN == 1)
        // Not yet fsynced on the leader: a fetch from where the log starts is served at once, up to what is written.
        _ = r.on(.write(id: 42, payload: [2], now: 10))
        #expect(r.on(.receive(from: n3, .fetch(epoch: 5, from: 1, previousEpoch: 0, durable: 0), now: 20)) == [
            .serveFrames(to: n3, epoch: 5, previousEpoch: 0, from: 1, through: 1, horizon: 0)
        ])
        // A follower that appended frames it has not fsynced serves a candidate that fenced it none of them.
        var f = replica(n2)
        _ = f.on(.leaderKey(LeaderKey(node: n1, epoch: 5, lease: 7)))
        _ = f.on(.message(n1, .frames(epoch: 5, previousEpoch: 0, frames: [frame(1, 5), frame(2, 5)], leaderDurable: 2, horizon: 0)))
        _ = f.on(.written(lsn: 2, now: 10))
        #expect(f.lastLSN == 2 && f.durableLSN == 0 && f.servableLSN == 0)
        _ = f.on(.message(n3, .fence(epoch: 6)))
        #expect(f.on(.message(n3, .fetch(epoch: 6, from: 1, previousEpoch: 0, durable: 0))) == [
            .send(to: n3, .frames(epoch: 6, previousEpoch: 0, frames: [], leaderDurable: 0, horizon: 0))
        ])
    }

    @Test("--ack quorum: a majority of fsyncs acknowledges a write, whether or not the leader's own fsync is one of them")
    func quorumWithoutLeaderFsync() {
        var r = leader()
        _ = r.on(.message(n3, .fetch(epoch: 5, from: 1, previousEpoch: 0, durable: 0)))
        _ = r.on(.write(id: 41, payload: [1], now: 10))
        _ = r.on(.written(lsn: 1, now: 10))
        // One follower's fsync and the leader's not: no majority.
        #expect(acknowledged(r.on(.message(n2, .fetch(epoch: 5, from: 2, previousEpoch: 5, durable: 1)))).isEmpty)
        // Both followers' fsyncs: a majority without the leader.
        #expect(acknowledged(r.on(.message(n3, .fetch(epoch: 5, from: 2, previousEpoch: 5, durable: 1)))) == [41])
        // And the leader's fsync with one follower's, in the other order.
        var l = leader()
        _ = l.on(.write(id: 42, payload: [2], now: 10))
        _ = l.on(.written(lsn: 1, now: 10))
        #expect(acknowledged(l.on(.message(n2, .fetch(epoch: 5, from: 2, previousEpoch: 5, durable: 1)))).isEmpty)
        #expect(acknowledged(l.on(.durable(lsn: 1, now: 10))) == [42])
    }

    @Test("--ack leader acknowledges on the leader's own fsync")
    func leaderAck() {
        var r = leader(ack: .leader)
        _ = r.on(.write(id: 41, payload: [1], now: 10))
        #expect(acknowledged(r.on(.durable(lsn: 1, now: 10))) == [41])
    }

    @Test("a moving durable end is published at once in a new epoch or under a new lease, else at most once per publishInterval")
    func publishThrottled() {
        func published(_ actions: [ReplicaAction]) -> [LogEnd] {
            actions.compactMap { action -> LogEnd? in
                if case .publish(let end) = action { return end }
                return nil
            }
        }
        var r = leader(ack: .leader)
        #expect(r.configuration.publishInterval == 500)
        #expect(published(r.on(.tick(now: 20))) == [LogEnd(epoch: 0, lsn: 0)])
        // LSN 1 is the first of epoch 5: at once.
        _ = r.on(.write(id: 41, payload: [1], now: 30))
        _ = r.on(.durable(lsn: 1, now: 30))
        #expect(published(r.on(.tick(now: 40))) == [LogEnd(epoch: 5, lsn: 1)])
        // Within epoch 5 it waits 500 ms from that publish, and then publishes where the end is.
        _ = r.on(.write(id: 42, payload: [2], now: 50))
        _ = r.on(.durable(lsn: 2, now: 50))
        #expect(published(r.on(.tick(now: 60))).isEmpty)
        _ = r.on(.write(id: 43, payload: [3], now: 100))
        _ = r.on(.durable(lsn: 3, now: 100))
        _ = r.on(.leaseRenewed(lease: 7, sentAt: 500))
        #expect(published(r.on(.tick(now: 539))).isEmpty)
        #expect(published(r.on(.tick(now: 540))) == [LogEnd(epoch: 5, lsn: 3)])
        #expect(published(r.on(.tick(now: 1_100))).isEmpty)
        // A new lease holds no published end: the same end goes out under it at the next tick.
        _ = r.on(.leaseLost(lease: 7))
        _ = r.on(.leaseGranted(lease: 8, sentAt: 1_150))
        #expect(published(r.on(.tick(now: 1_160))) == [LogEnd(epoch: 5, lsn: 3)])
    }

    @Test("a leader stops acknowledging before its lease could lapse: it steps down and abandons pending writes")
    func leaseLapse() {
        var r = leader()
        _ = r.on(.write(id: 41, payload: [1], now: 10))
        _ = r.on(.durable(lsn: 1, now: 10))
        // No renewal came back; at 800 ms (TTL 1 000 minus the 200 ms margin) the lease may be gone.
        let actions = r.on(.tick(now: 800))
        #expect(actions.contains { action in
            if case .abandon(let ids, _) = action { return ids == [41] }
            return false
        })
        #expect(actions.contains(.resign(epoch: 5)))
        #expect(r.role == .follower)
        #expect(acknowledged(r.on(.message(n2, .fetch(epoch: 5, from: 2, previousEpoch: 5, durable: 1)))).isEmpty)
        if case .refuse = r.on(.write(id: 42, payload: [2], now: 10)).first {} else { Issue.record("a write was not refused") }
    }

    @Test("a renewed lease keeps the leader acknowledging past the first lease's end")
    func leaseRenewed() {
        var r = leader(ack: .leader)
        _ = r.on(.leaseRenewed(lease: 7, sentAt: 600))
        _ = r.on(.tick(now: 900))
        #expect(r.role == .leader(epoch: 5))
        _ = r.on(.write(id: 41, payload: [1], now: 10))
        #expect(acknowledged(r.on(.durable(lsn: 1, now: 950))) == [41])
    }

    @Test("a replica fenced by a newer candidate ignores the old leader's frames and answers the candidate")
    func fencing() {
        var r = replica(n2)
        let follow = r.on(.leaderKey(LeaderKey(node: n1, epoch: 5, lease: 3)))
        #expect(follow.contains(.fence(epoch: 5)))
        #expect(follow.contains(.send(to: n1, .fetch(epoch: 5, from: 1, previousEpoch: 0, durable: 0))))
        let fenced = r.on(.message(n3, .fence(epoch: 9)))
        #expect(fenced.contains(.fence(epoch: 9)))
        #expect(fenced.contains(.send(to: n3, .fenced(epoch: 9, end: .empty))))
        #expect(r.on(.message(n1, .frames(epoch: 5, previousEpoch: 0, frames: [frame(1, 5)], leaderDurable: 1, horizon: 0))).isEmpty)
        #expect(r.lastLSN == 0)
        // An older candidate gets no answer.
        #expect(r.on(.message(n1, .fence(epoch: 6))).isEmpty)
    }

    @Test("a follower truncates its divergent suffix once and ignores a late duplicate of that answer")
    func divergence() {
        var r = replica(n2, epochs: [5, 5, 5])
        _ = r.on(.leaderKey(LeaderKey(node: n1, epoch: 9, lease: 3)))
        let answer = ReplicaMessage.diverged(epoch: 9, from: 4, previousEpoch: 5, agreedEpoch: 5, agreedLSN: 2)
        let cut = r.on(.message(n1, answer))
        #expect(cut.contains(.truncate(after: 2)))
        #expect(cut.contains(.send(to: n1, .fetch(epoch: 9, from: 3, previousEpoch: 5, durable: 2))))
        #expect(r.on(.message(n1, .frames(epoch: 9, previousEpoch: 5, frames: [frame(3, 9)], leaderDurable: 3, horizon: 0)))
            .contains(.append([frame(3, 9)])))
        #expect(!r.on(.message(n1, answer)).contains(.truncate(after: 2)))
        #expect(r.lastLSN == 3 && r.history.epoch(at: 3) == 9)
    }

    @Test("a leader answers a fetch that disagrees with diverged, and one past its end in its own epoch with ahead")
    func consistencyCheck() {
        var r = leader(ack: .leader)
        for id in 1...3 as ClosedRange<UInt64> { _ = r.on(.write(id: id, payload: [UInt8(id)], now: 10)) }
        _ = r.on(.durable(lsn: 3, now: 10))
        // A follower whose frame 2 is of the older epoch 4: the leader has no epoch ≤ 4, so they agree on nothing.
        #expect(
            r.on(.message(n2, .fetch(epoch: 5, from: 3, previousEpoch: 4, durable: 2)))
                == [.send(to: n2, .diverged(epoch: 5, from: 3, previousEpoch: 4, agreedEpoch: 0, agreedLSN: 0))])
        #expect(
            r.on(.message(n2, .fetch(epoch: 5, from: 6, previousEpoch: 5, durable: 5)))
                == [.send(to: n2, .ahead(epoch: 5, leaderLastLSN: 3))])
        #expect(
            r.on(.message(n2, .fetch(epoch: 5, from: 2, previousEpoch: 5, durable: 1)))
                == [.serveFrames(to: n2, epoch: 5, previousEpoch: 5, from: 2, through: 3, horizon: 0)])
    }

    @Test("a candidate catches up from the most complete fenced replica before it leads")
    func candidateCatchesUp() {
        var r = replica(n1, epochs: [5, 5])
        _ = r.on(.campaignResult(epoch: 9))
        let ask = r.on(.message(n2, .fenced(epoch: 9, end: LogEnd(epoch: 5, lsn: 4))))
        #expect(ask.contains(.send(to: n2, .fetch(epoch: 9, from: 3, previousEpoch: 5, durable: 2))))
        #expect(r.role == .candidate(epoch: 9))
        _ = r.on(.message(n2, .frames(epoch: 9, previousEpoch: 5, frames: [frame(3, 5), frame(4, 5)], leaderDurable: 4, horizon: 0)))
        #expect(r.role == .candidate(epoch: 9))
        _ = r.on(.durable(lsn: 4, now: 20))
        #expect(r.role == .leader(epoch: 9))
        #expect(r.lastLSN == 4)
    }

    @Test("the leader's compaction horizon is the lowest fsynced, matched position of every follower, never lower")
    func compactionHorizon() {
        var r = leader()
        for id in 1...4 as ClosedRange<UInt64> { _ = r.on(.write(id: id, payload: [UInt8(id)], now: 10)) }
        _ = r.on(.durable(lsn: 4, now: 10))
        _ = r.on(.message(n2, .fetch(epoch: 5, from: 4, previousEpoch: 5, durable: 3)))
        // n3 has not fetched in this epoch: nothing is known to be on every replica.
        #expect(r.compactionHorizon == 0)
        // n3 matched through 2 but fsynced only 1.
        _ = r.on(.message(n3, .fetch(epoch: 5, from: 3, previousEpoch: 5, durable: 1)))
        #expect(r.compactionHorizon == 1)
        _ = r.on(.message(n3, .fetch(epoch: 5, from: 5, previousEpoch: 5, durable: 4)))
        #expect(r.compactionHorizon == 3)
        // A fetch that disagrees (n2 after losing frames) does not lower it, and the frames served carry it.
        _ = r.on(.message(n2, .fetch(epoch: 5, from: 2, previousEpoch: 5, durable: 1)))
        #expect(r.compactionHorizon == 3)
        #expect(
            r.on(.message(n2, .fetch(epoch: 5, from: 4, previousEpoch: 5, durable: 3)))
                == [.serveFrames(to: n2, epoch: 5, previousEpoch: 5, from: 4, through: 4, horizon: 3)])
    }

    @Test("a follower takes the horizon from its leader's frames, capped at what it has fsynced, and keeps it on restart")
    func followerHorizon() {
        var r = replica(n2, epochs: [5, 5])
        _ = r.on(.leaderKey(LeaderKey(node: n1, epoch: 5, lease: 3)))
        _ = r.on(.message(n1, .frames(epoch: 5, previousEpoch: 5, frames: [frame(3, 5)], leaderDurable: 3, horizon: 3)))
        #expect(r.compactionHorizon == 2)
        // From another node than its leader: ignored.
        _ = r.on(.message(n3, .frames(epoch: 5, previousEpoch: 5, frames: [], leaderDurable: 3, horizon: 3)))
        #expect(r.compactionHorizon == 2)
        var history = EpochHistory()
        history.record(epoch: 5, at: 1)
        _ = r.on(.start(now: 20, lastLSN: 3, history: history))
        #expect(r.compactionHorizon == 2)
    }

    @Test("a follower behind its leader's compacted prefix halts, naming the fix")
    func compactedPrefixHalts() {
        var r = replica(n2)
        _ = r.on(.leaderKey(LeaderKey(node: n1, epoch: 5, lease: 3)))
        let actions = r.on(.message(n1, .compacted(epoch: 5, through: 40)))
        guard case .halt(let reason) = actions.first else {
            Issue.record("no halt: \(actions)")
            return
        }
        #expect(reason.contains("compacted its log up to LSN 40") && reason.contains("re-seeded"))
    }

    @Test("a node that finds its own log ahead of its epoch's leader halts")
    func halts() {
        var r = replica(n2, epochs: [5, 5, 5])
        _ = r.on(.leaderKey(LeaderKey(node: n1, epoch: 5, lease: 3)))
        let actions = r.on(.message(n1, .ahead(epoch: 5, leaderLastLSN: 1)))
        #expect(actions.count == 1)
        if case .halt(let reason) = actions.first { #expect(reason.contains("diverged within an epoch")) } else {
            Issue.record("no halt")
        }
        #expect(r.on(.tick(now: 1_000)).isEmpty)
    }
}
