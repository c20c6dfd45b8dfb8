import Cloudlet
import CloudletClient
import CloudletConcurrency
import CloudletCore
import CloudletReplication
import CloudletServer
import Foundation
import Synchronization

/// A node of a replicated cluster (`cloudlet serve --cluster`): registers in etcd, agrees on the replica set, runs
/// a ``PartitionDriver`` per partition of its store, carries their messages to the other nodes and answers theirs
/// (``handle(_:next:)``, installed in front of the server's router), forwards writes to the leader.
///
/// Lifecycle: ``init(configuration:store:)``, then the server starts (so peers can reach it), then ``start()``;
/// ``stop()`` before the server stops and the store closes. A node whose log must lose a divergent suffix asks for
/// a restart (``restarts``): the caller stops everything, runs ``CloudletStore/truncatePartition(at:partition:after:)``
/// and starts again.
public final class ClusterNode: Sendable {
    public let configuration: ClusterConfiguration
    let etcd: EtcdClient
    let keys: ClusterConfiguration.Keys
    let store: CloudletStore
    /// Messages to other nodes: short timeouts, a dead peer must not hold threads.
    let peerTransport: CurlTransport
    /// Requests forwarded to the leader: as long as a client request may take.
    let forwardTransport: CurlTransport
    /// Blobs fetched from peers (``fetchBlob(_:from:)``): up to the largest asset, streamed to a file.
    let blobTransport: CurlTransport
    private let origin = ContinuousClock.now
    /// Other nodes' advertised URLs, as etcd last listed them.
    let peers = Mutex<[NodeID: String]>([:])
    let drivers = Mutex<[UInt32: PartitionDriver]>([:])
    let replicaSet = Mutex<[NodeID]>([])
    /// The etcd mod revision of the replica set in `replicaSet` (``ReplicaEvent/membership(replicas:version:)``).
    let placementVersion = Mutex<Int64>(0)
    private let loops = Mutex<[Task<Void, Never>]>([])
    private let nodeLease = Mutex<Int64?>(nil)
    /// Operators' wishes about who leads, as etcd last listed them.
    let preferences = Mutex(LeadershipPreferences())
    /// Since when (``now()``) partition 0 has had no leader, as ``mayLead(_:)`` last saw it.
    let leaderless = Mutex<Millis?>(nil)
    /// The share repair a new leader runs (``repairSharesWhenLeading()``).
    let shareRepair = Mutex(ShareRepair())
    /// Bytes of replication messages sent to and received from other nodes (sealed, as on the wire).
    let bytesSent = Atomic<Int>(0)
    let bytesReceived = Atomic<Int>(0)
    /// Blobs fetched from peers, their bytes, and blobs skipped because no peer had them (``ensureBlobs(_:leader:)``).
    let blobsFetched = Atomic<Int>(0)
    let blobBytesFetched = Atomic<Int>(0)
    let blobsSkipped = Atomic<Int>(0)
    /// Seeds this node serves to empty replicas (ClusterNode+Seeding.swift), by id; bytes of their files sent, and
    /// bytes of a seed this node copied.
    let seedSessions = Mutex<[String: SeedSession]>([:])
    let seedBytesServed = Atomic<Int>(0)
    /// Per process, not per node: the node that copied a seed is replaced by a new one when the process reopens its
    /// store, and the counter must survive that.
    static let seedBytesReceived = Atomic<Int>(0)
    /// Set once this node asked to restart for a seed (an empty store told `compacted`).
    let seedRequested = Atomic<Bool>(false)
    /// Seals and opens messages between nodes with the cluster's key (from etcd, once the node joined).
    let authenticator = Mutex<MessageAuthenticator?>(nil)
    private let restartStream: AsyncStream<RestartRequest>
    let restartContinuation: AsyncStream<RestartRequest>.Continuation

    /// A divergent suffix to cut from a partition's log before the node runs again — or, with `seeded`, a seed
    /// staged (or wanted) for an empty store: the node reopens its store (``StoreSeeding/finish(at:)`` first).
    public struct RestartRequest: Sendable {
        public var partition: Int
        public var after: UInt64
        public var seeded = false
    }

    /// Told the cluster's asset signing key once the node has the cluster's key (``start()``, before it registers).
    private let assetKeyReceiver: (@Sendable ([UInt8]) -> Void)?

    /// `assetKeys`: told the key the cluster's nodes sign asset URLs and receipts with, as the node starts
    /// (`cloudlet serve --cluster` gives it to its server: `Server.useAssetSigningKey(_:)`).
    public init(configuration: ClusterConfiguration, store: CloudletStore, assetKeys: (@Sendable ([UInt8]) -> Void)? = nil) {
        assetKeyReceiver = assetKeys
        self.configuration = configuration
        self.store = store
        etcd = EtcdClient(url: configuration.etcd)
        keys = ClusterConfiguration.Keys(configuration.name)
        var peerOptions = CurlTransport.Options()
        peerOptions.timeout = 5
        peerOptions.connectTimeout = 1
        peerOptions.maxIdleHandles = 32
        peerTransport = CurlTransport(options: peerOptions)
        var forwardOptions = CurlTransport.Options()
        forwardOptions.timeout = 60
        forwardOptions.connectTimeout = 2
        forwardTransport = CurlTransport(options: forwardOptions)
        var blobOptions = CurlTransport.Options()
        blobOptions.timeout = 600
        blobOptions.connectTimeout = 1
        blobTransport = CurlTransport(options: blobOptions)
        (restartStream, restartContinuation) = AsyncStream.makeStream(of: RestartRequest.self)
    }

    /// Milliseconds since the node started, on the monotonic clock.
    func now() -> Millis {
        let d = ContinuousClock.now - origin
        return Millis(d.components.seconds) * 1000 + Millis(d.components.attoseconds / 1_000_000_000_000_000)
    }

    // MARK: Joining

    /// Registers the node, waits for the replica set (the first ``ClusterConfiguration/replicas`` nodes to
    /// register), and starts replicating every partition. A node outside the set waits to be added when its store is
    /// empty (``waitToBeAdded(_:)``). Throws when etcd cannot be reached, or this node is outside the replica set
    /// with data (naming it); `CancellationError` when cancelled while it waits.
    public func start() async throws {
        let me = configuration.node
        try await checkClusterIdentity()
        try await loadClusterKey()
        let ttl = Int((configuration.leaseTTL + 999) / 1000)
        let lease = try await etcd.grantLease(ttl: ttl)
        nodeLease.withLock { $0 = lease }
        try await etcd.put(keys.node(me), Array(configuration.advertise.utf8), lease: lease)
        let keepAlive = Task { [self] in await keepNodeAlive(ttl: ttl) }
        loops.withLock { $0.append(keepAlive) }

        var replicas: [NodeID] = []
        var waited = 0
        while replicas.isEmpty {
            if let placement = try await etcd.get(keys.placement) {
                replicas = Self.replicaList(placement.value)
                placementVersion.withLock { $0 = placement.modRevision }
                break
            }
            let registered = try await etcd.list(prefix: keys.nodes).map { NodeID(String($0.key.dropFirst(keys.nodes.count))) }
            if registered.count >= configuration.replicas {
                let chosen = registered.sorted().prefix(configuration.replicas).map(\.name).joined(separator: ",")
                _ = try await etcd.create(keys.placement, Array(chosen.utf8), lease: 0)
                continue
            }
            if waited % 50 == 0 {
                ServerLog.note(
                    "cluster \(configuration.name): \(registered.count) of \(configuration.replicas) nodes registered, waiting")
            }
            waited += 1
            try await Task.sleep(for: .milliseconds(100))
        }
        if !replicas.contains(me) {
            replicas = try await waitToBeAdded(replicas)
        }
        replicaSet.withLock { $0 = replicas }
        try await etcd.put(keys.applied + me.name, Array(String(placementVersion.withLock { $0 }).utf8), lease: lease)
        // An empty store in a cluster that holds data is seeded from files, not replayed record by record.
        if try await seedWithRetries() {
            restartContinuation.yield(RestartRequest(partition: 0, after: 0, seeded: true))
            return
        }
        ServerLog.note("cluster \(configuration.name): node \(me), replicas \(replicas.map(\.name).joined(separator: ", ")), ack \(configuration.ackMode.rawValue)")
        var started: [UInt32: PartitionDriver] = [:]
        let first = PartitionDriver(target: .partition(store.partitions[0]), node: self, replicas: replicas) { [weak self] driver in
            self?.mayLead(driver) ?? false
        }
        started[0] = first
        // The other partitions' leaders follow partition 0's, so that one node takes every write and the others
        // forward to it (leadership spread over nodes per partition is not done yet).
        for p in store.partitions.dropFirst() {
            started[p.id] = PartitionDriver(target: .partition(p), node: self, replicas: replicas, shouldLead: { _ in first.isLeader })
        }
        if let log = store.catalog.log {
            // The catalog's leader follows partition 0's too: a data commit that adds schema needs both on one node.
            started[Catalog.logPartition] = PartitionDriver(
                target: .catalog(store.catalog, log), node: self, replicas: replicas,
                shouldLead: { _ in first.isLeader })
        }
        let version = UInt64(placementVersion.withLock { $0 })
        for driver in started.values {
            try driver.start()
            driver.feed(.membership(replicas: replicas, version: version))
        }
        drivers.withLock { $0 = started }
        let poll = Task { [self] in await pollLoop() }
        let tick = Task { [self] in await tickLoop() }
        loops.withLock { $0 += [poll, tick] }
    }

    /// The file in a store naming the cluster it belongs to (`CLUSTER`: the cluster's name and id, one a line).
    static let identityFile = "CLUSTER"

    /// The cluster's id is created once in etcd (`<prefix>/id`); a store remembers the id of the cluster it joined
    /// first and refuses any other: its data belongs to that one. Throws `.invalidArguments` naming both.
    private func checkClusterIdentity() async throws {
        let key = keys.root + "id"
        _ = try await etcd.create(key, Array(UUID().uuidString.lowercased().utf8), lease: 0)
        guard let stored = try await etcd.get(key) else {
            throw CloudletError(.serviceUnavailable, "etcd at \(etcd.endpoint) lost the cluster id \(key)")
        }
        let id = String(decoding: stored.value, as: UTF8.self)
        let path = store.path + "/" + Self.identityFile
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            let lines = text.split(separator: "\n").map(String.init)
            guard lines.count >= 2, lines[1] == id else {
                throw CloudletError(
                    .invalidArguments,
                    "the store at \(store.path) belongs to cluster \(lines.first ?? "?") (id \(lines.count > 1 ? lines[1] : "?")), "
                        + "not to cluster \(configuration.name) (id \(id)) that etcd at \(etcd.endpoint) coordinates")
            }
            return
        }
        let temp = path + ".tmp"
        try Data("\(configuration.name)\n\(id)\n".utf8).write(to: URL(fileURLWithPath: temp))
        let fd = open(temp, O_RDONLY)
        if fd >= 0 {
            fsync(fd)
            close(fd)
        }
        guard rename(temp, path) == 0 else {
            throw CloudletError(.io, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        let dir = open(store.path, O_RDONLY)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
    }

    /// Messages between nodes are sealed with a key created once in etcd (`<prefix>/key`, 32 random bytes as hex):
    /// only processes that can read the cluster's etcd keys can make messages a node accepts.
    private func loadClusterKey() async throws {
        let key = keys.root + "key"
        _ = try await etcd.create(key, Array(try MessageAuthenticator.newKey().utf8), lease: 0)
        guard let stored = try await etcd.get(key), let bytes = Self.unhex(stored.value), bytes.count >= 16 else {
            throw CloudletError(.serviceUnavailable, "etcd at \(etcd.endpoint) holds no usable cluster key at \(key)")
        }
        authenticator.withLock { $0 = MessageAuthenticator(key: bytes) }
        assetKeyReceiver?(Self.assetSigningKey(clusterKey: bytes))
    }

    /// The key every node of the cluster signs asset URLs and receipts with: derived from the cluster's key
    /// (HMAC-SHA256 of a fixed label), so it is the same on every node, changes when the cluster's key does, and is
    /// not the key that seals messages between nodes.
    static func assetSigningKey(clusterKey: [UInt8]) -> [UInt8] {
        MessageAuthenticator(key: clusterKey).tag(Array("cloudlet asset tickets v1".utf8))
    }

    private static func unhex(_ text: [UInt8]) -> [UInt8]? {
        guard text.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(text.count / 2)
        var i = 0
        while i < text.count {
            guard let hi = hexDigit(text[i]), let lo = hexDigit(text[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func hexDigit(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    private func keepNodeAlive(ttl: Int) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(Int(configuration.leaseTTL / 5)))
            if Task.isCancelled { return }
            guard let lease = nodeLease.withLock({ $0 }) else { continue }
            do {
                if try await etcd.keepAlive(lease) { continue }
                let fresh = try await etcd.grantLease(ttl: ttl)
                nodeLease.withLock { $0 = fresh }
                try await etcd.put(keys.node(configuration.node), Array(configuration.advertise.utf8), lease: fresh)
                try await etcd.put(
                    keys.applied + configuration.node.name, Array(String(placementVersion.withLock { $0 }).utf8), lease: fresh)
            } catch {
                // etcd is down: try again at the next round.
            }
        }
    }

    private func pollLoop() async {
        while !Task.isCancelled {
            if let all = try? await etcd.list(prefix: keys.root) {
                var addresses: [NodeID: String] = [:]
                for kv in all where kv.key.hasPrefix(keys.nodes) {
                    addresses[NodeID(String(kv.key.dropFirst(keys.nodes.count)))] = String(decoding: kv.value, as: UTF8.self)
                }
                peers.withLock { $0 = addresses }
                if let placement = all.first(where: { $0.key == keys.placement }) { await applyPlacement(placement) }
                let wishes = LeadershipPreferences(keys: keys, listing: all)
                let changed = preferences.withLock { p in
                    defer { p = wishes }
                    return p != wishes
                }
                if changed {
                    ServerLog.note(
                        "cluster \(configuration.name): drained nodes [\(wishes.drained.map(\.name).sorted().joined(separator: ", "))], "
                            + "preferred leader \(wishes.preferred?.name ?? "none")")
                }
                for (id, driver) in drivers.withLock({ $0 }) {
                    let prefix = keys.partition(id)
                    driver.coordinator(all.filter { $0.key.hasPrefix(prefix) })
                }
            }
            try? await Task.sleep(for: .milliseconds(Int(configuration.pollInterval)))
        }
    }

    /// A node outside the replica set: with an empty store it stays registered and waits until `cloudlet cluster add`
    /// puts it in the set (then it seeds itself and tails like any replica); with data it refuses to start (a
    /// removed replica may not come back as it was). Returns the set that holds it.
    private func waitToBeAdded(_ replicas: [NodeID]) async throws -> [NodeID] {
        let me = configuration.node
        let set = replicas.map(\.name).joined(separator: ", ")
        guard storeIsEmpty else {
            throw CloudletError(
                .invalidArguments,
                "node \(me) is not a replica of cluster \(configuration.name): its replica set is \(set); a node outside it "
                    + "starts only with an empty store, to be added with `cloudlet cluster add \(me.name)`")
        }
        ServerLog.note(
            "cluster \(configuration.name): node \(me) is not a replica (the set is \(set)); waiting to be added: "
                + "cloudlet cluster add \(me.name)")
        while true {
            try await Task.sleep(for: .milliseconds(Int(configuration.pollInterval)))
            guard let placement = try await etcd.get(keys.placement) else { continue }
            let now = Self.replicaList(placement.value)
            if now.contains(me) {
                placementVersion.withLock { $0 = placement.modRevision }
                ServerLog.note("cluster \(configuration.name): node \(me) added; replicas \(now.map(\.name).joined(separator: ", "))")
                return now
            }
        }
    }

    static func replicaList(_ value: [UInt8]) -> [NodeID] {
        String(decoding: value, as: UTF8.self).split(separator: ",").map { NodeID(String($0)) }
    }

    /// A replica set changed in etcd (`cloudlet cluster add|remove`): every driver learns it (a node taken out halts),
    /// and the node records, under its lease, that it runs with it.
    private func applyPlacement(_ placement: EtcdClient.KeyValue) async {
        let changed = placementVersion.withLock { v in
            defer { v = max(v, placement.modRevision) }
            return placement.modRevision > v
        }
        guard changed else { return }
        let replicas = Self.replicaList(placement.value)
        ServerLog.note("cluster \(configuration.name): replica set now \(replicas.map(\.name).joined(separator: ", "))")
        // The drivers first: a node added to the set is served a seed only once it is in `replicaSet`, and by then
        // every log's replica counts it, so no compaction horizon passes what the seed gives it.
        for driver in drivers.withLock({ Array($0.values) }) {
            driver.feed(.membership(replicas: replicas, version: UInt64(placement.modRevision)))
        }
        if replicas.contains(configuration.node) { replicaSet.withLock { $0 = replicas } }
        if let lease = nodeLease.withLock({ $0 }) {
            _ = try? await etcd.put(
                keys.applied + configuration.node.name, Array(String(placement.modRevision).utf8), lease: lease)
        }
    }

    private func tickLoop() async {
        while !Task.isCancelled {
            let all = drivers.withLock { $0 }
            if let first = all[0] { observeLeadership(first.status) }
            for driver in all.values { driver.tick() }
            repairSharesWhenLeading()
            expireSeedSessions()
            try? await Task.sleep(for: .milliseconds(Int(configuration.tickInterval)))
        }
    }

    /// Stops replicating: the loops end, waiting writers fail with `SERVICE_UNAVAILABLE`, the node's keys are
    /// released (its leases revoked, so that another node can lead at once).
    public func stop() async {
        for task in loops.withLock({ l in defer { l = [] }; return l }) { task.cancel() }
        let all = drivers.withLock { d in defer { d = [:] }; return Array(d.values) }
        var leases: [Int64] = nodeLease.withLock { $0 }.map { [$0] } ?? []
        for driver in all {
            driver.stop()
            if let lease = driver.currentLease { leases.append(Int64(bitPattern: lease)) }
        }
        for lease in leases { try? await etcd.revokeLease(lease) }
        releaseSeedSessions()
        restartContinuation.finish()
    }

    // MARK: For the drivers

    /// Sends a message to another node (fire and forget: the protocol retries what is lost), from a thread of
    /// ``BlockingThreads`` (one thread switch; not a task that waits for another thread).
    func send(to: NodeID, _ envelope: ReplicaEnvelope) {
        BlockingThreads.shared.submit { [self] in sendBlocking(to: to, envelope) }
    }

    /// ``send(to:_:)`` on the calling thread, which may block (up to the peers' timeout, 5 s): for a job of
    /// ``BlockingThreads`` that made the message (a leader serving frames), saving the switch to another thread.
    func sendBlocking(to: NodeID, _ envelope: ReplicaEnvelope) {
        guard let url = peers.withLock({ $0[to] }), let sealer = authenticator.withLock({ $0 }) else { return }
        let request = HTTPClientRequest(
            method: "POST", url: url + ClusterNode.messagePath, headers: [("Content-Type", "application/octet-stream")],
            body: sealer.seal(envelope.encoded()))
        bytesSent.add(request.body?.count ?? 0, ordering: .relaxed)
        _ = try? peerTransport.sendBlocking(request)
    }

    /// Restart requests: a partition's log must lose frames after an LSN (a divergent suffix) before it goes on.
    public var restarts: AsyncStream<RestartRequest> { restartStream }

    func requestRestart(truncating partition: Int, after lsn: UInt64) {
        ServerLog.note("partition \(partition): its log diverged from the leader's after LSN \(lsn); restarting to truncate it")
        restartContinuation.yield(RestartRequest(partition: partition, after: lsn))
    }

    /// An invariant of the protocol broke: stop the process, naming it. `_exit`, not `exit`: this runs on a
    /// worker thread while others still serve, and `exit` would run atexit handlers and static destructors under
    /// them (a CI run saw the halting node die of SIGSEGV instead of exiting 70). Nothing is buffered to lose:
    /// ``ServerLog`` writes standard error unbuffered, and what the log acknowledged is already on disk.
    func halt(_ reason: String) -> Never {
        ServerLog.note("error: halting: \(reason)")
        _exit(70)
    }
}

extension ClusterNode {
    /// Whether this node leads every partition of its store now (a fresh cluster's first leader bootstraps it).
    public var leadsEveryPartition: Bool {
        let all = drivers.withLock { Array($0.values) }
        return !all.isEmpty && all.allSatisfy(\.isLeader)
    }
}
