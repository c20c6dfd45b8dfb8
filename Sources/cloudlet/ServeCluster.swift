import Cloudlet
import CloudletCluster
import CloudletCommandLine
import CloudletConcurrency
import CloudletCore
import CloudletReplication
import CloudletServer
import Foundation
import Synchronization

/// `cloudlet serve --cluster etcd://… --node NAME`: the server as a node of a replicated cluster. It runs until
/// SIGTERM/SIGINT; when its log must lose a divergent suffix (it led an epoch whose last writes no quorum had) it
/// stops, truncates and starts again by itself.
enum ServeCluster {
    static let help = """
        CLUSTER OPTIONS (docs/replication.md, README "Cluster"):
          --cluster URL       etcd's client URL (etcd://127.0.0.1:2379): join the cluster it coordinates
          --node NAME         this node's name in the cluster (required with --cluster)
          --advertise URL     where other nodes reach this one (default: the URL it listens on); also the
                              default --public-url of the node
          --replicas N        replicas of every partition (default 3); the first N nodes to register form the set
          --ack MODE          quorum (default): acknowledge a write once a majority of replicas fsynced it;
                              leader: once the leader fsynced it (a failover can lose acknowledged writes)
          --lease-ttl SECONDS the etcd lease of each replica (default 5, 2…60): a dead leader is replaced after about
                              this long
          --cluster-name NAME key prefix in etcd (default cloudlet), for several clusters on one etcd
        """

    static let options = ["--cluster", "--node", "--advertise", "--replicas", "--ack", "--lease-ttl", "--cluster-name"]

    /// The cluster options, or nil without `--cluster`.
    static func configuration(_ o: CommandLineOptions) throws -> ClusterConfiguration? {
        guard let url = o["--cluster"] else {
            if let stray = options.dropFirst().first(where: { o[$0] != nil }) {
                throw UsageError(message: "\(stray) goes with --cluster")
            }
            return nil
        }
        guard url.hasPrefix("etcd://") || url.hasPrefix("http://") else {
            throw UsageError(message: "--cluster needs etcd://HOST:PORT, not '\(url)'")
        }
        guard let node = o["--node"], !node.isEmpty, !node.contains("/"), !node.contains(",") else {
            throw UsageError(message: "--cluster needs --node NAME (no '/' or ',')")
        }
        var c = ClusterConfiguration(etcd: url, node: NodeID(node), advertise: o["--advertise"] ?? "")
        c.replicas = try o.integer("--replicas", in: 1...9) ?? c.replicas
        switch o["--ack"] ?? "quorum" {
        case "quorum": c.ackMode = .quorum
        case "leader": c.ackMode = .leader
        case let m: throw UsageError(message: "--ack must be quorum or leader, not '\(m)'")
        }
        if let ttl = try o.integer("--lease-ttl", in: 2...60, "seconds") {
            c.leaseTTL = Millis(ttl) * 1000
            c.clockSkewMargin = min(c.clockSkewMargin, c.leaseTTL / 2)
        }
        c.name = o["--cluster-name"] ?? c.name
        return c
    }

    enum Event: Sendable {
        case signal(Int32)
        case restart(ClusterNode.RestartRequest)
    }

    static func run(
        dir: String, server config: ServerConfiguration, store baseConfig: StoreConfiguration, container: String,
        cluster: ClusterConfiguration, stop: SignalWaiter
    ) async throws {
        let (events, sink) = AsyncStream.makeStream(of: Event.self)
        // A signal while the node joins (waiting for the other nodes, or to be added to the replica set) stops it too,
        // also one that came before the join began.
        let joining = Mutex<(task: Task<Void, any Error>?, signalled: Bool)>((nil, false))
        Task {
            let s = await stop.wait()
            joining.withLock {
                $0.signalled = true
                $0.task?.cancel()
            }
            sink.yield(.signal(s))
        }
        var iterator = events.makeAsyncIterator()
        while true {
            var storeConfig = baseConfig
            storeConfig.replicated = true
            // A seed copied before the last restart is moved into place (or, interrupted, discarded) first.
            switch try StoreSeeding.finish(at: dir) {
            case .installed: ServerConfiguration.standardError("cloudlet: installed the seed copied into \(dir)/seeding")
            case .discarded: ServerConfiguration.standardError("cloudlet: discarded an interrupted seed in \(dir)/seeding")
            case .nothing: break
            }
            let store = try await StoreAccess.open(dir, configuration: storeConfig, hint: "One server per data directory")
            let current = Mutex<ClusterNode?>(nil)
            var serverConfig = config
            serverConfig.additionalMetrics = { current.withLock { $0 }?.metricsText() ?? "" }
            serverConfig.interceptor = { request, next in
                guard let node = current.withLock({ $0 }) else {
                    // Asset URLs too: until the node has the cluster's key it would check them with its own.
                    guard request.path.hasPrefix("/database/") || request.path.hasPrefix("/cloudlet/cluster/")
                        || request.path.hasPrefix(Server.assetPathPrefix)
                    else {
                        return next(request)
                    }
                    return ClusterNode.unavailableResponse("the node is joining its cluster")
                }
                return node.handle(request, next: next)
            }
            let server: Server
            let node: ClusterNode
            var stoppedWhileJoining = false
            do {
                server = try Server(store: store, configuration: serverConfig)
                try server.start()
                // Before joining: the other nodes may wait for this one to register, and a script for this line.
                say("listening on \(server.url)")
                var c = cluster
                if c.advertise.isEmpty { c.advertise = server.url }
                // Asset URLs and receipts signed with the cluster's key, so that every node takes what another issued.
                node = ClusterNode(configuration: c, store: store, assetKeys: { [server] in server.useAssetSigningKey($0) })
                current.withLock { $0 = node }
                let join = Task { try await node.start() }
                joining.withLock {
                    $0.task = join
                    if $0.signalled { join.cancel() }
                }
                defer { joining.withLock { $0.task = nil } }
                do { try await join.value } catch is CancellationError { stoppedWhileJoining = true }
            } catch {
                try? await store.close()
                throw error
            }
            if stoppedWhileJoining {
                await node.stop()
                await ThreadBridge.offload { server.stop() }
                try await store.close()
                ServerConfiguration.standardError("cloudlet: stopped while joining the cluster; store closed")
                return
            }
            say("cloudlet: serving store \(dir) (id \(store.metadata.storeID)) as node \(cluster.node) of cluster \(cluster.name)")
            let restarts = Task {
                for await r in node.restarts { sink.yield(.restart(r)) }
            }
            let bootstrap = Task { await bootstrapWhenLeading(node: node, store: store, container: container, url: server.url) }
            let event = await iterator.next()!
            restarts.cancel()
            bootstrap.cancel()
            await node.stop()
            await ThreadBridge.offload { server.stop() }
            try await store.close()
            switch event {
            case .signal(let s):
                ServerConfiguration.standardError("cloudlet: \(s == SIGINT ? "SIGINT" : "SIGTERM"): stopped; store closed")
                return
            case .restart(let r) where r.seeded:
                ServerConfiguration.standardError("cloudlet: reopening the store to seed it from another replica")
            case .restart(let r):
                let t = try await ThreadBridge.offload {
                    r.partition == Int(Catalog.logPartition)
                        ? try CloudletStore.truncateCatalog(at: dir, after: r.after)
                        : try CloudletStore.truncatePartition(at: dir, partition: r.partition, after: r.after)
                }
                ServerConfiguration.standardError(
                    "cloudlet: partition \(r.partition): truncated LSNs \(r.after + 1)…\(t.previousLastLSN) (a divergent suffix); starting again")
            }
        }
    }

    /// The first leader of a fresh cluster creates its first API token and user (replicated like any record).
    private static func bootstrapWhenLeading(node: ClusterNode, store: CloudletStore, container: String, url: String) async {
        while !Task.isCancelled {
            if node.leadsEveryPartition {
                do {
                    if let b = try await Credentials(store: store).bootstrapIfNeeded(
                        container: container, userName: Serve.firstUserName)
                    {
                        // An admin credential too, so that the console opens from the first start.
                        let admin = try await Credentials(store: store).createAdminToken()
                        Serve.printBootstrap(b, admin: admin, url: url)
                    }
                    return
                } catch {
                    // Not acknowledged (leadership moved): the next leader tries again.
                }
            }
            try? await Task.sleep(for: .milliseconds(200))
        }
    }
}
