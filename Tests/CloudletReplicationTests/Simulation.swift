import CloudletCore
import CloudletReplication

/// A deterministic simulation of one partition's replicas (FoundationDB-style): N ``Replica`` state machines, a
/// simulated etcd (``SimulatedCoordinator``), simulated logs that lose what was not fsynced when their node crashes,
/// and a network that delays, reorders, duplicates, drops and partitions — all driven by one seed, on virtual time.
/// The protocol's invariants are checked after every step; ``run()`` returns the first violation with a trace.
struct SimulationOptions {
    var nodes = 3
    var ackMode = AckMode.quorum
    /// Virtual milliseconds of faults, then of healed running with writes, then at most this long to converge.
    var chaos: Millis = 6_000
    var healed: Millis = 3_000
    var convergeWithin: Millis = 8_000
    /// A client write every this many milliseconds.
    var writeInterval: Millis = 15
    var dropRate = 0.02
    var duplicateRate = 0.01
    /// Takes one replica out for good during the faults (`cloudlet cluster remove`): it crashes and never returns,
    /// the replica set without it is written to the coordinator, and each live node learns of it after its own delay.
    var removeReplica = false
    /// Adds one replica during the faults (`cloudlet cluster add`): a node beyond ``nodes`` starts outside the set,
    /// is written into it, seeds its log from the leader's fsynced frames (the shell copies the leader's files) and
    /// tails; each live node learns of the change after its own delay.
    var addReplica = false
    /// During the faults, the chance that a leader crashes right after it shipped frames it has not fsynced itself
    /// (Raft's order: it sends frames while it syncs them), before its fsync completes.
    var crashAfterShippingRate = 0.02
}

final class Simulation {
    /// A node: its state machine, its log (what the disk holds), and its incarnation (a restart is a new one).
    struct Node {
        var id: NodeID
        var replica: Replica
        var log: [ReplicatedFrame] = []
        var durable = 0
        /// How far the replica was told its log is written (``ReplicaEvent/written(lsn:now:)``).
        var written = 0
        var alive = true
        var incarnation = 0
        /// An fsync under way: it makes the frames up to `target` durable when it completes.
        var fsync: (target: Int, generation: Int)? = nil
        var fsyncGeneration = 0
        /// The newest coordinator revision the node's watch has delivered (older notifications are ignored).
        var watchRevision: UInt64 = 0
        /// How far the node's clock has fallen behind (a clock fault; it survives restarts, heal resets it).
        var clockLag: Millis = 0
        /// The node's watch delivers nothing until then (a stalled watch stream); the next resync catches it up.
        var watchStalledUntil: Millis = 0
        /// How far its log is compacted: frames up to here can no longer be served (a disk fact, kept over a crash).
        /// The node compacts up to its replica's compaction horizon whenever it ticks.
        var compacted = 0
    }

    enum Request {
        case grant(sentAt: Millis), renew(lease: UInt64, sentAt: Millis), campaign(lease: UInt64), resign(epoch: UInt64)
        case publish(LogEnd, lease: UInt64)
    }

    enum Step {
        case tick(Int)
        case deliver(to: Int, incarnation: Int, from: Int, ReplicaMessage)
        case request(from: Int, incarnation: Int, Request)
        case reply(to: Int, incarnation: Int, ReplicaEvent)
        case watch(to: Int, incarnation: Int, revision: UInt64, LeaderKey?, [NodeID: LogEnd])
        case fsyncDone(Int, generation: Int)
        /// The log's frames up to the LSN are written (readable, not yet fsynced): the replica is told.
        case writeDone(Int, incarnation: Int, lsn: Int)
        /// A leader crashes just after shipping frames it had not fsynced.
        case crashAfterShipping(Int, incarnation: Int)
        case coordinatorTick
        case write
        case fault
        case restart(Int, incarnation: Int)
        case heal
        case remove
        case add
        case membership(to: Int, incarnation: Int, version: UInt64)
    }

    /// The endpoint index of the coordinator in ``cuts``.
    static let coordinatorEndpoint = -1

    let seed: UInt64
    let options: SimulationOptions
    var rng: SplitMix64
    var now: Millis = 0
    var queue = EventQueue<Step>()
    var nodes: [Node] = []
    var coordinator: SimulatedCoordinator
    var configurations: [ReplicaConfiguration]
    /// The replica set as the coordinator holds it, and the revision that wrote it (0: the initial one).
    var placement: [NodeID] = []
    var placementVersion: UInt64 = 0
    /// The replica taken out (``SimulationOptions/removeReplica``), and the replica sets leaders reported settled.
    var removed: Int?
    /// The node outside the set until ``SimulationOptions/addReplica``'s change adds it (nil once added).
    var spare: Int?
    /// Whether the added node was added (``SimulationOptions/addReplica``).
    var added = false
    var settledVersions: Set<UInt64> = []
    /// Links that are cut, as (min, max) endpoint pairs.
    var cuts: Set<[Int]> = []
    var healedAt: Millis
    var writesStopAt: Millis

    // What the clients and the checker know.
    var nextWrite: UInt64 = 1
    /// Every write a leader staged: where.
    var staged: [UInt64: (lsn: UInt64, epoch: UInt64)] = [:]
    var acknowledged: [UInt64: (lsn: UInt64, epoch: UInt64)] = [:]
    var ackedOrder: [UInt64] = []
    /// Every frame any log ever held, by (LSN, epoch): the log-matching property says it is one frame.
    var framesSeen: [LogEnd: [UInt8]] = [:]
    var leaderOfEpoch: [UInt64: Int] = [:]
    var trace: [String] = []
    var failure: String?
    var steps = 0
    /// Divergent suffixes cut off (frames removed).
    var truncations = 0
    /// Compactions up to a new horizon, over all nodes.
    var compactions = 0
    /// Frames a leader served before its own fsync; leaders crashed right after such a serve; and crashed leaders
    /// that lost frames (never fsynced) which another replica holds.
    var shippedUnsynced = 0
    var crashesAfterShipping = 0
    var leaderLostShippedFrames = 0
    /// Frames (by LSN and epoch) a leader lost in a crash, never having fsynced them.
    var lostByLeader: Set<LogEnd> = []
    /// How many trace lines a failure shows.
    var traceLength = 60

    init(seed: UInt64, options: SimulationOptions = SimulationOptions()) {
        self.seed = seed
        self.options = options
        rng = SplitMix64(seed: seed)
        var timing = ReplicaConfiguration(node: NodeID("n1"), replicas: [])
        timing.leaseTTL = 1_000
        timing.renewInterval = 200
        timing.clockSkewMargin = 200
        timing.retryInterval = 80
        timing.electionJitter = 100
        timing.maxFramesPerFetch = 16
        coordinator = SimulatedCoordinator(ttl: timing.leaseTTL)
        let all = (1...(options.nodes + (options.addReplica ? 1 : 0))).map { NodeID("n\($0)") }
        let ids = Array(all.prefix(options.nodes))
        configurations = all.enumerated().map { i, id in
            var c = timing
            c.node = id
            c.replicas = ids.contains(id) ? ids : ids + [id]
            c.ackMode = options.ackMode
            c.seed = SplitMix64.mix(seed &+ UInt64(i))
            return c
        }
        healedAt = options.chaos
        writesStopAt = options.chaos + options.healed
        nodes = configurations.map { Node(id: $0.node, replica: Replica(configuration: $0)) }
        placement = ids
        if options.addReplica {
            spare = nodes.count - 1
            nodes[nodes.count - 1].alive = false
        }
    }

    // MARK: Running

    /// Runs the whole scenario; returns nil, or what went wrong with the end of the trace.
    func run() -> String? {
        for i in nodes.indices where i != spare {
            schedule(Millis(i) * 7, .tick(i))
            perform(i, nodes[i].replica.on(.start(now: 0, lastLSN: 0, history: EpochHistory())))
        }
        schedule(0, .coordinatorTick)
        schedule(50, .write)
        schedule(100 + random(200...1_200), .fault)
        schedule(healedAt, .heal)
        if options.removeReplica { schedule(random(500...(healedAt - 500)), .remove) }
        if options.addReplica { schedule(random(500...(healedAt - 500)), .add) }
        let deadline = writesStopAt + options.convergeWithin
        while failure == nil, let (time, step) = queue.pop() {
            now = time
            if now > deadline { break }
            steps += 1
            handle(step)
            if failure == nil && now >= writesStopAt && steps % 64 == 0 && converged() { return nil }
        }
        if failure == nil && !converged() {
            fail("the replicas did not converge within \(options.convergeWithin) ms of the end of writes: " + describe())
        }
        guard let failure else { return nil }
        return failure + "\n--- last steps ---\n" + trace.suffix(traceLength).joined(separator: "\n")
    }

    private func handle(_ step: Step) {
        switch step {
        case .tick(let i):
            schedule(20, .tick(i))
            if nodes[i].alive {
                deliver(i, .tick(now: localTime(i)))
                compact(i)
            }
        case .deliver(let to, let incarnation, let from, let message):
            guard nodes[to].alive, nodes[to].incarnation == incarnation else { return }
            if let brief = Self.brief(message) { note("\(nodes[from].id) → \(nodes[to].id): \(brief)") }
            deliver(to, .receive(from: nodes[from].id, message, now: localTime(to)))
        case .request(let from, let incarnation, let request):
            coordinatorHandles(request, from: from, incarnation: incarnation)
        case .reply(let to, let incarnation, let event):
            guard nodes[to].alive, nodes[to].incarnation == incarnation else { return }
            deliver(to, event)
        case .watch(let to, let incarnation, let revision, let key, let progress):
            guard nodes[to].alive, nodes[to].incarnation == incarnation, revision >= nodes[to].watchRevision else { return }
            nodes[to].watchRevision = revision
            // The shell reads the replica set in the same etcd read as the leader key and the progress (one list of
            // the cluster's keys), so a node that learns of a leader (or of none, and campaigns) knows the set as of
            // then. The added node's change is delivered that way too, besides the delayed notice of `.add`.
            if added, nodes[to].replica.membershipVersion < placementVersion {
                deliver(to, .membership(replicas: placement, version: placementVersion))
            }
            deliver(to, .progress(progress))
            deliver(to, .leaderKey(key))
        case .fsyncDone(let i, let generation):
            guard nodes[i].alive, let f = nodes[i].fsync, f.generation == generation else { return }
            nodes[i].fsync = nil
            nodes[i].durable = max(nodes[i].durable, min(f.target, nodes[i].log.count))
            deliver(i, .durable(lsn: UInt64(nodes[i].durable), now: localTime(i)))
            startFsync(i)
        case .writeDone(let i, let incarnation, let lsn):
            guard nodes[i].alive, nodes[i].incarnation == incarnation, lsn <= nodes[i].log.count else { return }
            nodes[i].written = max(nodes[i].written, lsn)
            deliver(i, .written(lsn: UInt64(lsn), now: localTime(i)))
        case .crashAfterShipping(let i, let incarnation):
            guard nodes[i].alive, nodes[i].incarnation == incarnation, nodes[i].log.count > nodes[i].durable else { return }
            note("crash after shipping: \(nodes[i].id) crashes with frames it served and has not fsynced")
            crashesAfterShipping += 1
            crash(i)
            schedule(random(50...2_000), .restart(i, incarnation: nodes[i].incarnation))
        case .coordinatorTick:
            schedule(10, .coordinatorTick)
            let lost = coordinator.expire(now: now)
            if lost { note("coordinator: the leader's lease expired") }
            if lost || steps % 8 == 0 { broadcastWatch() }
        case .write:
            if now < writesStopAt { schedule(options.writeInterval, .write) }
            clientWrite()
        case .fault:
            guard now < healedAt else { return }
            schedule(random(200...1_500), .fault)
            injectFault()
        case .restart(let i, let incarnation):
            guard !nodes[i].alive, nodes[i].incarnation == incarnation, i != removed, i != spare else { return }
            restart(i)
        case .remove:
            let i = Int(rng.next() % UInt64(nodes.count))
            if nodes[i].alive { crash(i) }
            removed = i
            placement = placement.filter { $0 != nodes[i].id }
            placementVersion = coordinator.revision + 1_000_000
            note("remove: \(nodes[i].id) is taken out for good; replica set \(placement.map(\.name)) (version \(placementVersion))")
            for j in nodes.indices where nodes[j].alive {
                schedule(chance(0.2) ? random(100...800) : random(1...40), .membership(to: j, incarnation: nodes[j].incarnation, version: placementVersion))
            }
        case .add:
            addSpare()
        case .membership(let to, let incarnation, let version):
            guard nodes[to].alive, nodes[to].incarnation == incarnation else { return }
            deliver(to, .membership(replicas: placement, version: version))
        case .heal:
            note("heal: every link restored, every node restarted")
            cuts = []
            for i in nodes.indices {
                nodes[i].clockLag = 0
                nodes[i].watchStalledUntil = 0
                if !nodes[i].alive && i != removed && i != spare { restart(i) }
            }
        }
    }

    /// Hands `event` to node `i`, performs its actions, and checks the invariants.
    private func deliver(_ i: Int, _ event: ReplicaEvent) {
        let actions = nodes[i].replica.on(event)
        perform(i, actions)
        checkLeadership(i)
    }

    // MARK: Actions

    private func perform(_ i: Int, _ actions: [ReplicaAction]) {
        for action in actions {
            guard failure == nil else { return }
            switch action {
            case .send(let to, let message):
                send(from: i, to: index(of: to), message)
            case .serveFrames(let to, let epoch, let previousEpoch, let from, let through, let horizon):
                // A leader serves what its log has written (maybe not fsynced); anyone else only fsynced frames.
                let leading = nodes[i].replica.role == .leader(epoch: epoch)
                let servable = leading ? max(nodes[i].durable, nodes[i].written) : nodes[i].durable
                guard through <= UInt64(servable), from >= 1 else {
                    fail("\(nodes[i].id) serves frames \(from)…\(through) but has \(nodes[i].durable) fsynced, \(nodes[i].written) written")
                    return
                }
                if through > UInt64(nodes[i].durable), from <= through {
                    shippedUnsynced += 1
                    if now < healedAt, chance(options.crashAfterShippingRate) {
                        // Before its fsync completes (usually 1–6 ms, now and then 20–80 ms): at once, or once the
                        // followers may have fsynced and reported the frames.
                        schedule(chance(0.5) ? random(0...1) : random(2...60), .crashAfterShipping(i, incarnation: nodes[i].incarnation))
                    }
                }
                // What the server's shell does when the log no longer holds `from` as written.
                if from <= through, Int(from) <= nodes[i].compacted {
                    send(from: i, to: index(of: to), .compacted(epoch: epoch, through: UInt64(nodes[i].compacted)))
                    continue
                }
                let frames = from <= through ? Array(nodes[i].log[Int(from - 1)..<Int(through)]) : []
                send(from: i, to: index(of: to), .frames(
                        epoch: epoch, previousEpoch: previousEpoch, frames: frames,
                        leaderDurable: UInt64(nodes[i].durable), horizon: horizon))
            case .append(let frames):
                append(i, frames)
            case .truncate(let after):
                truncate(i, after: Int(after))
            case .fence:
                break
            case .grantLease(let sentAt):
                request(from: i, .grant(sentAt: sentAt))
            case .renewLease(let lease, let sentAt):
                request(from: i, .renew(lease: lease, sentAt: sentAt))
            case .campaign(let lease):
                request(from: i, .campaign(lease: lease))
            case .resign(let epoch):
                request(from: i, .resign(epoch: epoch))
            case .publish(let end):
                if let lease = nodes[i].replica.currentLease { request(from: i, .publish(end, lease: lease)) }
            case .acknowledge(let ids):
                for id in ids { acknowledge(id, by: i) }
            case .refuse, .abandon:
                break
            case .halt(let reason):
                fail("\(nodes[i].id) halted: \(reason)")
            case .settled(let version):
                checkSettled(version, by: i)
            }
        }
    }

    private func append(_ i: Int, _ frames: [ReplicatedFrame]) {
        for frame in frames {
            guard frame.lsn == UInt64(nodes[i].log.count) + 1 else {
                fail("\(nodes[i].id) appends LSN \(frame.lsn) after \(nodes[i].log.count)")
                return
            }
            let key = LogEnd(epoch: frame.epoch, lsn: frame.lsn)
            if let seen = framesSeen[key], seen != frame.payload {
                fail("two different frames at \(key) (\(nodes[i].id) appends one): logs diverged within an epoch")
                return
            }
            framesSeen[key] = frame.payload
            if lostByLeader.remove(key) != nil {
                leaderLostShippedFrames += 1
                note("\(nodes[i].id) appends LSN \(frame.lsn) of epoch \(frame.epoch), which its leader shipped and then lost in a crash")
            }
            if case .leader(let e) = nodes[i].replica.role, frame.epoch == e {
                staged[Self.writeID(frame.payload)] = (frame.lsn, frame.epoch)
            }
            nodes[i].log.append(frame)
        }
        // The committer writes what was staged (0–2 ms), then fsyncs it; a leader may serve it once written.
        schedule(random(0...2), .writeDone(i, incarnation: nodes[i].incarnation, lsn: nodes[i].log.count))
        startFsync(i)
    }

    private func truncate(_ i: Int, after: Int) {
        guard after < nodes[i].log.count else { return }
        guard after >= nodes[i].compacted else {
            fail("\(nodes[i].id) truncates after LSN \(after), inside its compacted prefix (through \(nodes[i].compacted))")
            return
        }
        if options.ackMode == .quorum {
            for frame in nodes[i].log[after...] {
                let id = Self.writeID(frame.payload)
                if let acked = acknowledged[id], acked.lsn == frame.lsn, acked.epoch == frame.epoch {
                    fail("\(nodes[i].id) truncates after LSN \(after), removing acknowledged write \(id) at LSN \(frame.lsn)")
                    return
                }
            }
        }
        note("\(nodes[i].id) truncates after LSN \(after) (had \(nodes[i].log.count))")
        truncations += nodes[i].log.count - after
        nodes[i].log.removeLast(nodes[i].log.count - after)
        nodes[i].durable = min(nodes[i].durable, after)
        nodes[i].written = min(nodes[i].written, after)
        if let f = nodes[i].fsync { nodes[i].fsync = (min(f.target, after), f.generation) }
    }

    private func startFsync(_ i: Int) {
        guard nodes[i].fsync == nil, nodes[i].log.count > nodes[i].durable else { return }
        nodes[i].fsyncGeneration += 1
        nodes[i].fsync = (nodes[i].log.count, nodes[i].fsyncGeneration)
        // Mostly quick; now and then a slow one (a disk's latency spike), which lets followers fsync a leader's
        // frames before the leader does.
        schedule(chance(0.05) ? random(20...80) : random(1...6), .fsyncDone(i, generation: nodes[i].fsyncGeneration))
    }

    private func acknowledge(_ id: UInt64, by i: Int) {
        // The leader's lease must still live at the coordinator — while its clock is right (a clock that fell behind
        // voids the lease's promise; then only fencing keeps acknowledged writes safe).
        guard nodes[i].clockLag > 0
            || (nodes[i].replica.currentLease.flatMap { coordinator.leases[$0] }.map { $0.expiry > now } ?? false)
        else {
            fail("\(nodes[i].id) acknowledges write \(id) after its lease expired at the coordinator")
            return
        }
        guard let where_ = staged[id] else {
            fail("\(nodes[i].id) acknowledges write \(id), which no leader staged")
            return
        }
        guard acknowledged[id] == nil else {
            fail("write \(id) acknowledged twice")
            return
        }
        acknowledged[id] = where_
        ackedOrder.append(id)
        note("\(nodes[i].id) acknowledges write \(id) at LSN \(where_.lsn) of epoch \(where_.epoch)")
    }

    // MARK: Invariants

    /// A leader reports replica set `version` settled: every acknowledged write must be fsynced on a majority of it
    /// (so that another replica may be taken out without losing one).
    private func checkSettled(_ version: UInt64, by i: Int) {
        guard version == placementVersion else { return }
        let members = nodes.indices.filter { placement.contains(nodes[$0].id) }
        if options.ackMode == .quorum {
            for id in ackedOrder {
                let at = acknowledged[id]!
                let holders = members.filter { j in
                    at.lsn <= UInt64(nodes[j].durable) && nodes[j].log[Int(at.lsn - 1)].epoch == at.epoch
                }
                guard holders.count >= placement.count / 2 + 1 else {
                    fail("\(nodes[i].id) reports replica set \(version) settled, but acknowledged write \(id) is fsynced on \(holders.count) of its \(placement.count) replicas only")
                    return
                }
            }
        }
        note("\(nodes[i].id) reports replica set \(version) settled")
        settledVersions.insert(version)
    }

    /// Compacts node `i`'s log up to its replica's compaction horizon — after checking that the horizon holds: every
    /// replica, crashed ones included, has the frames up to it fsynced and equal to this node's.
    private func compact(_ i: Int) {
        let horizon = Int(nodes[i].replica.compactionHorizon)
        guard failure == nil, horizon > nodes[i].compacted else { return }
        guard horizon <= nodes[i].durable else {
            fail("\(nodes[i].id)'s compaction horizon \(horizon) is past its own fsynced LSN \(nodes[i].durable)")
            return
        }
        let prefix = nodes[i].log[0..<horizon]
        if let j = nodes.indices.first(where: {
            $0 != removed && $0 != spare && (nodes[$0].durable < horizon || nodes[$0].log[0..<horizon] != prefix)
        }) {
            fail("\(nodes[i].id) compacts through LSN \(horizon), but \(nodes[j].id) does not hold those frames fsynced and equal")
            return
        }
        note("\(nodes[i].id) compacts its log through LSN \(horizon)")
        nodes[i].compacted = horizon
        compactions += 1
    }

    /// At most one leader per epoch; a new leader holds every acknowledged write (quorum mode).
    private func checkLeadership(_ i: Int) {
        guard failure == nil, case .leader(let epoch) = nodes[i].replica.role else { return }
        if let other = leaderOfEpoch[epoch] {
            if other != i { fail("\(nodes[other].id) and \(nodes[i].id) both lead epoch \(epoch)") }
            return
        }
        leaderOfEpoch[epoch] = i
        note("\(nodes[i].id) leads epoch \(epoch) from LSN \(nodes[i].log.count + 1)")
        guard options.ackMode == .quorum else { return }
        for id in ackedOrder {
            let at = acknowledged[id]!
            let log = nodes[i].log
            guard at.lsn <= UInt64(log.count), log[Int(at.lsn - 1)].epoch == at.epoch,
                Self.writeID(log[Int(at.lsn - 1)].payload) == id
            else {
                fail("\(nodes[i].id) leads epoch \(epoch) without acknowledged write \(id) (LSN \(at.lsn) of epoch \(at.epoch))")
                return
            }
        }
    }

    /// Everything healed has converged: one leader, every log equal to its log and fsynced, every acknowledged write
    /// in it, no write twice, nothing no client sent.
    func converged() -> Bool {
        let members = nodes.indices.filter { $0 != removed && $0 != spare }.map { nodes[$0] }
        guard members.allSatisfy(\.alive), let leader = nodes.firstIndex(where: { n in
            if n.alive, case .leader = n.replica.role { return n.replica.ownEpoch == coordinator.leaderKey?.epoch } else { return false }
        }) else { return false }
        let log = nodes[leader].log
        guard members.allSatisfy({ $0.log == log && $0.durable == log.count }) else { return false }
        // Once a replica was taken out, its set must end up settled (its leader heard from a majority of it).
        if (removed != nil || added) && !settledVersions.contains(placementVersion) { return false }
        if spare != nil { return false }  // not added yet
        var ids: Set<UInt64> = []
        for frame in log {
            let id = Self.writeID(frame.payload)
            if id == 0 || id >= nextWrite || !ids.insert(id).inserted {
                fail("the converged log holds write \(id) \(id >= nextWrite ? "that no client sent" : "twice")")
                return false
            }
        }
        if options.ackMode == .quorum, let missing = acknowledged.first(where: { !ids.contains($0.key) }) {
            fail("acknowledged write \(missing.key) is missing from the converged log")
            return false
        }
        return true
    }

    // MARK: Clients, faults, the network

    private func clientWrite() {
        // Clients mostly follow the coordinator's leader key (a redirect); some hold an old idea of the leader and
        // try any node (which writes only if it believes it leads).
        let target =
            chance(0.3) ? Int(rng.next() % UInt64(nodes.count))
            : coordinator.leaderKey.map { index(of: $0.node) } ?? Int(rng.next() % UInt64(nodes.count))
        guard nodes[target].alive else { return }
        let id = nextWrite
        nextWrite += 1
        deliver(target, .write(id: id, payload: Self.payload(id), now: localTime(target)))
    }

    private func injectFault() {
        let i = Int(rng.next() % UInt64(nodes.count))
        switch rng.next() % 8 {
        case 7:
            // The nastiest for a lease: the leader loses the coordinator and its clock falls behind, so it believes
            // in its lease after the coordinator gave the key away. Fencing must stop its acknowledgements.
            guard let key = coordinator.leaderKey else { return }
            let l = index(of: key.node)
            let lag = random(300...1_500)
            note("partition + clock: the leader \(key.node) is cut off from the coordinator and falls \(lag) ms behind")
            cuts.insert([Self.coordinatorEndpoint, l])
            nodes[l].clockLag += lag
            // And one follower's watch stalls, so that only the new candidate's fence tells it the leader changed.
            let f = (l + 1 + Int(rng.next() % UInt64(nodes.count - 1))) % nodes.count
            nodes[f].watchStalledUntil = now + random(300...1_500)
            note("watch: \(nodes[f].id)'s watch stalls until \(nodes[f].watchStalledUntil) ms")
        case 6:
            // The node's clock stalls for a while, then runs on: it now trails the coordinator's. Beyond the
            // clock-skew margin the lease no longer protects anything; fencing still must.
            let lag = random(100...1_500)
            note("clock: \(nodes[i].id) falls \(lag) ms behind")
            nodes[i].clockLag += lag
        case 0, 1:
            guard nodes[i].alive else { return }
            crash(i)
            schedule(random(50...2_000), .restart(i, incarnation: nodes[i].incarnation))
        case 2:
            note("partition: \(nodes[i].id) is cut off from everyone")
            for j in -1..<nodes.count where j != i { cuts.insert([min(i, j), max(i, j)]) }
        case 3:
            note("partition: \(nodes[i].id) is cut off from the coordinator")
            cuts.insert([Self.coordinatorEndpoint, i])
        case 4:
            let j = (i + 1 + Int(rng.next() % UInt64(nodes.count - 1))) % nodes.count
            note("partition: \(nodes[i].id) ↮ \(nodes[j].id)")
            cuts.insert([min(i, j), max(i, j)])
        default:
            note("links restored")
            cuts = []
        }
    }

    /// `cloudlet cluster add`: once the partition has a live leader, the spare node is written into the replica set,
    /// the leader learns of it, the spare copies the leader's fsynced frames (and how far they are compacted) as its
    /// store and starts; each other live node learns of the new set after its own delay. Without a live leader (the seed has no source), tried again later.
    private func addSpare() {
        guard let i = spare else { return }
        guard let key = coordinator.leaderKey, let source = nodes.firstIndex(where: { $0.id == key.node }), nodes[source].alive
        else {
            schedule(100, .add)
            return
        }
        spare = nil
        added = true
        placement.append(nodes[i].id)
        placementVersion = coordinator.revision + 1_000_000
        // The source serves the seed only once it counts the new node (the shell updates the drivers before the set
        // the seed endpoint checks), so its compaction horizon holds from there.
        deliver(source, .membership(replicas: placement, version: placementVersion))
        nodes[i].log = Array(nodes[source].log.prefix(nodes[source].durable))
        nodes[i].durable = nodes[i].log.count
        nodes[i].written = nodes[i].log.count
        nodes[i].compacted = nodes[source].compacted
        note("add: \(nodes[i].id) joins with \(nodes[i].log.count) frames seeded from \(nodes[source].id); replica set \(placement.map(\.name)) (version \(placementVersion))")
        restart(i)
        schedule(Millis(i) * 7, .tick(i))
        for j in nodes.indices where j != i && j != source && nodes[j].alive {
            schedule(chance(0.2) ? random(100...800) : random(1...40), .membership(to: j, incarnation: nodes[j].incarnation, version: placementVersion))
        }
    }

    private func crash(_ i: Int) {
        // The disk keeps what was fsynced and maybe a prefix of the rest.
        let unsynced = nodes[i].log.count - nodes[i].durable
        let kept = nodes[i].durable + (unsynced > 0 ? Int(rng.next() % UInt64(unsynced + 1)) : 0)
        note("crash: \(nodes[i].id) (keeps \(kept) of \(nodes[i].log.count) frames, \(nodes[i].durable) fsynced)")
        if case .leader = nodes[i].replica.role {
            for f in nodes[i].log[kept...] { lostByLeader.insert(LogEnd(epoch: f.epoch, lsn: f.lsn)) }
        }
        nodes[i].log.removeLast(nodes[i].log.count - kept)
        nodes[i].durable = kept
        nodes[i].written = kept
        nodes[i].alive = false
        nodes[i].fsync = nil
        nodes[i].incarnation += 1
    }

    private func restart(_ i: Int) {
        note("restart: \(nodes[i].id) with \(nodes[i].log.count) frames")
        nodes[i].alive = true
        nodes[i].watchRevision = 0
        // A node starts with the replica set the coordinator holds now (the shell reads it when it joins).
        configurations[i].replicas = placement
        nodes[i].replica = Replica(configuration: configurations[i])
        var history = EpochHistory()
        for frame in nodes[i].log { history.record(epoch: frame.epoch, at: frame.lsn) }
        deliver(i, .start(now: localTime(i), lastLSN: UInt64(nodes[i].log.count), history: history))
        if placementVersion > 0 { deliver(i, .membership(replicas: placement, version: placementVersion)) }
    }

    private func send(from: Int, to: Int, _ message: ReplicaMessage) {
        guard !cuts.contains([min(from, to), max(from, to)]), !chance(options.dropRate) else { return }
        let copies = chance(options.duplicateRate) ? 2 : 1
        for _ in 0..<copies {
            schedule(networkDelay(), .deliver(to: to, incarnation: nodes[to].incarnation, from: from, message))
        }
    }

    private func request(from i: Int, _ request: Request) {
        guard !cuts.contains([Self.coordinatorEndpoint, i]), !chance(options.dropRate / 2) else { return }
        schedule(random(1...8), .request(from: i, incarnation: nodes[i].incarnation, request))
    }

    private func reply(to i: Int, incarnation: Int, _ event: ReplicaEvent) {
        guard !cuts.contains([Self.coordinatorEndpoint, i]), !chance(options.dropRate / 2) else { return }
        schedule(random(1...8), .reply(to: i, incarnation: incarnation, event))
    }

    private func coordinatorHandles(_ request: Request, from i: Int, incarnation: Int) {
        _ = coordinator.expire(now: now)
        let node = nodes[i].id
        var changed = false
        switch request {
        case .grant(let sentAt):
            let lease = coordinator.grant(to: node, now: now)
            reply(to: i, incarnation: incarnation, .leaseGranted(lease: lease, sentAt: sentAt))
        case .renew(let lease, let sentAt):
            if coordinator.renew(lease, now: now) {
                reply(to: i, incarnation: incarnation, .leaseRenewed(lease: lease, sentAt: sentAt))
            } else {
                reply(to: i, incarnation: incarnation, .leaseLost(lease: lease))
            }
        case .campaign(let lease):
            let epoch = coordinator.campaign(node, lease: lease)
            if let epoch { note("coordinator: \(node) wins the leader key, epoch \(epoch)") }
            reply(to: i, incarnation: incarnation, .campaignResult(epoch: epoch))
            changed = epoch != nil
        case .resign(let epoch):
            changed = coordinator.resign(epoch: epoch)
            if changed { note("coordinator: \(node) resigns epoch \(epoch)") }
        case .publish(let end, let lease):
            coordinator.publish(node, end, lease: lease)
        }
        if changed { broadcastWatch() }
    }

    /// The watch: every node learns the current leader key and published progress, in revision order.
    private func broadcastWatch() {
        for i in nodes.indices
        where nodes[i].alive && !cuts.contains([Self.coordinatorEndpoint, i]) && now >= nodes[i].watchStalledUntil {
            guard !chance(options.dropRate / 2) else { continue }
            // A watch can lag far behind (a busy coordinator, a reconnecting stream).
            schedule(
                chance(0.1) ? random(20...400) : random(1...8),
                .watch(
                    to: i, incarnation: nodes[i].incarnation, revision: coordinator.revision,
                    coordinator.leaderKey, coordinator.publishedProgress))
        }
    }

    // MARK: Helpers

    /// A message for the trace (nil for the many fetches and the replies to them that carry nothing).
    static func brief(_ message: ReplicaMessage) -> String? {
        switch message {
        case .fetch, .notLeader: return nil
        case .frames(let epoch, _, let frames, _, _):
            guard let first = frames.first, let last = frames.last else { return nil }
            return "frames \(first.lsn)…\(last.lsn) (epoch \(epoch))"
        default: return "\(message)"
        }
    }

    static func payload(_ id: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: id >> (8 * $0)) } }
    static func writeID(_ payload: [UInt8]) -> UInt64 {
        payload.count == 8 ? payload.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * $1.offset) } : 0
    }

    /// Node `i`'s clock.
    private func localTime(_ i: Int) -> Millis { now > nodes[i].clockLag ? now - nodes[i].clockLag : 0 }
    private func index(of node: NodeID) -> Int { nodes.firstIndex { $0.id == node }! }
    private func schedule(_ delay: Millis, _ step: Step) { queue.push(now + delay, step) }
    private func random(_ range: ClosedRange<Millis>) -> Millis { range.lowerBound + rng.next() % (range.upperBound - range.lowerBound + 1) }
    private func chance(_ p: Double) -> Bool { Double(rng.next() % 1_000_000) < p * 1_000_000 }
    private func networkDelay() -> Millis { chance(0.05) ? random(30...200) : random(1...12) }

    private func note(_ line: String) {
        trace.append("[\(now) ms] \(line)")
        if trace.count > 2 * traceLength { trace.removeFirst(traceLength) }
    }

    func fail(_ reason: String) {
        if failure == nil { failure = "seed \(seed) at \(now) ms: \(reason)" }
    }

    func describe() -> String {
        nodes.map { n in
            "\(n.id)[\(n.alive ? "up" : "down") \(n.replica.role) log \(n.log.count) durable \(n.durable) fence \(n.replica.fence) "
                + "sees \(n.replica.leaderKey.map(\.description) ?? "no leader") lease \(n.replica.currentLease.map(String.init) ?? "none")]"
        }.joined(separator: " ") + " key \(coordinator.leaderKey.map(\.description) ?? "none")"
    }
}

/// A min-heap of steps by time, first scheduled first among equal times (so that a run is deterministic).
struct EventQueue<Element> {
    private var heap: [(time: Millis, seq: UInt64, element: Element)] = []
    private var seq: UInt64 = 0

    mutating func push(_ time: Millis, _ element: Element) {
        seq += 1
        heap.append((time, seq, element))
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard less(i, parent) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    mutating func pop() -> (Millis, Element)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < heap.count && less(l, m) { m = l }
            if r < heap.count && less(r, m) { m = r }
            if m == i { break }
            heap.swapAt(i, m)
            i = m
        }
        return (top.time, top.element)
    }

    private func less(_ a: Int, _ b: Int) -> Bool { (heap[a].time, heap[a].seq) < (heap[b].time, heap[b].seq) }
}
