/// Messages between replicas: fetching and serving frames, the consistency check, fencing and catching up.
extension Replica {
    mutating func onMessage(_ from: NodeID, _ message: ReplicaMessage, _ out: inout [ReplicaAction]) {
        switch message {
        case .fetch(let epoch, let start, let previousEpoch, let durable):
            onFetch(from, epoch: epoch, from: start, previousEpoch: previousEpoch, durable: durable, &out)
        case .frames(let epoch, let previousEpoch, let frames, _, let horizon):
            guard isFetching(from: from, epoch: epoch) else { return }
            // Every replica holds the sender's frames up to its horizon, this one included (fsynced, so never past
            // what this log has fsynced).
            compactionHorizon = max(compactionHorizon, min(horizon, durableLSN))
            guard previousEpoch == history.epoch(at: lastLSN) else { return }
            onFrames(frames, epoch: epoch, &out)
        case .diverged(let epoch, let start, let previousEpoch, let agreedEpoch, let agreedLSN):
            // Only the answer to a fetch from where the log still ends (a duplicate or late one would cut frames
            // fetched since).
            guard isFetching(from: from, epoch: epoch), start == lastLSN + 1, previousEpoch == history.epoch(at: lastLSN)
            else { return }
            let own = history.end(ofEpochAtMost: agreedEpoch, lastLSN: lastLSN).lsn
            let cut = min(agreedLSN, own)
            if cut < lastLSN {
                out.append(.truncate(after: cut))
                lastLSN = cut
                durableLSN = min(durableLSN, cut)
                writtenLSN = min(writtenLSN, cut)
                history.truncate(after: cut)
            }
            fetchSentAt = nil
            sendFetch(&out)
        case .ahead(let epoch, let leaderLastLSN):
            guard isFetching(from: from, epoch: epoch) else { return }
            halted =
                "\(me)'s log holds frames of epoch \(epoch) up to LSN \(lastLSN), past the LSN \(leaderLastLSN) where "
                + "that epoch's leader \(from) ends: replicas diverged within an epoch (a bug)"
            out.append(.halt(reason: halted!))
        case .fence(let epoch):
            guard epoch >= fence else { return }
            if epoch > fence {
                fence = epoch
                fencedBy = from
                out.append(.fence(epoch: epoch))
                if let own = ownEpoch, own < epoch { stepDown("epoch \(epoch) fenced it", &out) }
            }
            guard fencedBy == from else { return }
            out.append(.send(to: from, .fenced(epoch: epoch, end: durableEnd)))
        case .fenced(let epoch, let end):
            guard case .candidate(let own) = role, own == epoch else { return }
            candidate.replies[from] = end
            evaluateCandidacy(&out)
        case .compacted(let epoch, let through):
            guard isFetching(from: from, epoch: epoch), lastLSN < through else { return }
            halted =
                "\(me) needs frames from LSN \(lastLSN + 1), but \(from) compacted its log up to LSN \(through): this "
                + "replica is behind the cluster's compaction horizon (it lost its log?) and must be re-seeded — stop "
                + "it, replace its store with a copy of a live replica's (docs/replication.md, \"Compaction\"), start it again"
            out.append(.halt(reason: halted!))
        case .notLeader:
            break
        }
    }

    /// Whether frames from `from` of `epoch` are what this node is waiting for: a follower's leader, or the source a
    /// candidate catches up from.
    private func isFetching(from node: NodeID, epoch: UInt64) -> Bool {
        guard epoch == fence else { return false }
        switch role {
        case .follower: return leaderKey?.node == node && leaderKey?.epoch == epoch
        case .candidate(let own): return own == epoch && candidate.source?.node == node
        case .leader: return false
        }
    }

    /// Asks the leader (or, as a candidate, the source) for the frames after the local log's last.
    mutating func sendFetch(_ out: inout [ReplicaAction]) {
        let target: NodeID
        switch role {
        case .follower:
            guard let key = leaderKey, key.node != me, key.epoch == fence else { return }
            target = key.node
        case .candidate:
            guard let source = candidate.source else { return }
            target = source.node
        case .leader:
            return
        }
        fetchSentAt = now
        out.append(
            .send(
                to: target,
                .fetch(epoch: fence, from: lastLSN + 1, previousEpoch: history.epoch(at: lastLSN), durable: durableLSN)))
    }

    private mutating func onFetch(
        _ node: NodeID, epoch: UInt64, from start: UInt64, previousEpoch: UInt64, durable: UInt64,
        _ out: inout [ReplicaAction]
    ) {
        let leading = role == .leader(epoch: epoch)
        // A leader serves its followers; a fenced replica serves the candidate that fenced it.
        guard leading || (epoch == fence && fencedBy == node && node != me) else {
            out.append(.send(to: node, .notLeader(epoch: fence)))
            return
        }
        guard start >= 1 else { return }
        let previous = start - 1
        let agreed = history.end(ofEpochAtMost: previousEpoch, lastLSN: lastLSN)
        guard agreed.epoch == previousEpoch, previous <= agreed.lsn else {
            if leading && previousEpoch == epoch && previous > lastLSN {
                out.append(.send(to: node, .ahead(epoch: epoch, leaderLastLSN: lastLSN)))
            } else {
                out.append(
                    .send(
                        to: node,
                        .diverged(
                            epoch: epoch, from: start, previousEpoch: previousEpoch, agreedEpoch: agreed.epoch,
                            agreedLSN: min(agreed.lsn, previous))))
            }
            return
        }
        if leading {
            leader.matched[node] = max(leader.matched[node] ?? 0, min(durable, previous))
            acknowledge(&out)
            advanceHorizon()
        }
        if start <= servableLSN {
            // A follower asks again from the same LSN once the frames arrived (it fetches ahead before its fsync)
            // and once they are fsynced (to report it): the frames already sent from there are not sent twice,
            // unless the follower asks after a retry interval (they may have been lost).
            if leading, let served = leader.served[node], served.from == start, now < served.at + configuration.retryInterval {
                return
            }
            if leading { leader.served[node] = (start, now) }
            out.append(serve(node, epoch: epoch, from: start))
        } else if leading {
            leader.parked[node] = start
        } else {
            // The candidate is as far as this replica's fsynced log: an empty batch tells it so.
            out.append(
                .send(
                    to: node,
                    .frames(
                        epoch: epoch, previousEpoch: previousEpoch, frames: [], leaderDurable: durableLSN,
                        horizon: compactionHorizon)))
        }
    }

    /// The frames from `from` on for `node`, as many as a batch holds (``servableLSN``: a leader's written ones,
    /// anyone else's fsynced ones).
    func serve(_ node: NodeID, epoch: UInt64, from: UInt64) -> ReplicaAction {
        .serveFrames(
            to: node, epoch: epoch, previousEpoch: history.epoch(at: from - 1), from: from,
            through: min(servableLSN, from + configuration.maxFramesPerFetch - 1), horizon: compactionHorizon)
    }

    private mutating func onFrames(_ frames: [ReplicatedFrame], epoch: UInt64, _ out: inout [ReplicaAction]) {
        // Nothing newer (a candidate's source has no more): see whether that is enough.
        guard let first = frames.first else {
            evaluateCandidacy(&out)
            return
        }
        // A reply to an older fetch (a duplicate or reordered one): the reply to the newest is on its way, or the
        // retry timer asks again.
        guard first.lsn == lastLSN + 1 else { return }
        var expected = first.lsn
        var lastEpoch = history.epoch(at: lastLSN)
        for frame in frames {
            guard frame.lsn == expected, frame.epoch >= lastEpoch, frame.epoch <= epoch else {
                halted = "\(me) got frames out of order from the leader of epoch \(epoch) (LSN \(frame.lsn) of epoch \(frame.epoch))"
                out.append(.halt(reason: halted!))
                return
            }
            expected += 1
            lastEpoch = frame.epoch
        }
        for frame in frames { history.record(epoch: frame.epoch, at: frame.lsn) }
        lastLSN = frames.last!.lsn
        out.append(.append(frames))
        sendFetch(&out)
    }

    /// A candidate becomes leader once a majority (itself included) is fenced and its own fsynced log has caught up
    /// with the most complete of theirs; until then it catches up from that replica.
    mutating func evaluateCandidacy(_ out: inout [ReplicaAction]) {
        guard case .candidate(let epoch) = role, durableLSN == lastLSN else { return }
        var replies = candidate.replies
        replies[me] = durableEnd
        guard replies.count >= configuration.quorum else { return }
        let best = replies.max { a, b in a.value < b.value || (a.value == b.value && a.key != me && b.key == me) }!
        if best.value > durableEnd {
            if candidate.source?.node != best.key || candidate.source!.end < best.value {
                candidate.source = (best.key, best.value)
                fetchSentAt = nil
            }
            if fetchSentAt == nil || now >= fetchSentAt! + configuration.retryInterval { sendFetch(&out) }
            return
        }
        role = .leader(epoch: epoch)
        leader = LeaderState(startLSN: lastLSN + 1)
        candidate = CandidateState()
        fetchSentAt = nil
        // A new leader settles its replica set again (the one that learned of a change may have stopped leading
        // before it could).
        if membershipVersion > 0 { unsettled = (membershipVersion, lastLSN) }
    }
}
