import Cloudlet
import CloudletClient
import CloudletConcurrency
import CloudletCore
import CloudletReplication
import CloudletServer
import CloudletWire
import Foundation

/// The node's HTTP side, in front of the server's router (``ServerConfiguration/interceptor``):
///
/// - `POST /cloudlet/cluster/message`: a ``ReplicaEnvelope`` from another node (binary; frames verbatim).
/// - `POST /cloudlet/cluster/blob`: an asset file, to another replica (``serveBlob(_:)``, ClusterNode+Blobs.swift).
/// - `POST /cloudlet/cluster/seed`: a store's files, to an empty replica (``serveSeed(_:)``, ClusterNode+Seeding.swift).
/// - `GET /cloudlet/cluster/status`: this node's view of the cluster as JSON (what `cloudlet cluster status` shows).
/// - writes (`…/modify`, asset upload requests) on a node that does not lead are **forwarded** to the leader and its
///   answer relayed: CloudKit clients (CloudKit JS, the Web Services examples) do not follow redirects for POSTs,
///   and a forwarded write keeps its signature (server-to-server keys sign the path, which does not change). With
///   no leader, `503 TRY_AGAIN_LATER` (SERVICE_UNAVAILABLE) with `retryAfter`.
/// - every answer to a write carries `X-Cloudlet-Commit-Position` (`partition:LSN,…`, the leader's committed LSNs
///   once the write was acknowledged); a read carrying it back as `?cloudletPosition=…` waits (up to 5 s) until this
///   node has applied that far (read-your-writes), else `503` with `retryAfter`.
/// - other reads are served locally (see docs/replication.md for how stale they may be).
extension ClusterNode {
    static let messagePath = "/cloudlet/cluster/message"
    static let statusPath = "/cloudlet/cluster/status"
    public static let commitPositionHeader = "X-Cloudlet-Commit-Position"
    static let forwardedParameter = "cloudletForwardedBy"
    static let positionParameter = "cloudletPosition"

    /// Answers cluster requests, forwards writes, and hands everything else to `next` (the server's router).
    public func handle(_ request: HTTPRequest, next: (HTTPRequest) -> HTTPResponse) -> HTTPResponse {
        switch request.path {
        case Self.messagePath: return receive(request)
        case Self.blobPath: return serveBlob(request)
        case Self.seedPath: return serveSeed(request)
        case Self.statusPath: return HTTPResponse(status: 200, body: Array(statusJSON().serialized().utf8))
        default: break
        }
        // An asset URL or receipt is checked with the cluster's asset key, which comes with the cluster's key.
        if request.path.hasPrefix(Server.assetPathPrefix), authenticator.withLock({ $0 }) == nil {
            return Self.unavailable("node \(configuration.node) has not joined cluster \(configuration.name) yet").response
        }
        guard request.path.hasPrefix("/database/") else { return next(request) }
        if Self.isWrite(request.path) { return write(request, next: next) }
        if let wanted = request.queryParameter(Self.positionParameter), let failure = waitForPosition(wanted) {
            return failure.response
        }
        return next(request)
    }

    static func isWrite(_ path: String) -> Bool {
        // `assets/rereference` too: it restarts the file's grace window where the save will check the file.
        path.hasSuffix("/modify") || path.hasSuffix("/assets/upload") || path.hasSuffix("/assets/rereference")
    }

    private func receive(_ request: HTTPRequest) -> HTTPResponse {
        guard request.method == "POST" else { return APIError.badRequest("\(Self.messagePath) takes POST").response }
        guard let opener = authenticator.withLock({ $0 }) else {
            return Self.unavailable("node \(configuration.node) has not joined cluster \(configuration.name) yet").response
        }
        bytesReceived.add(request.body.count, ordering: .relaxed)
        guard let message = opener.open(request.body) else {
            return APIError(
                "AUTHENTICATION_FAILED", "replication message not sealed with the key of cluster \(configuration.name)"
            ).response
        }
        let envelope: ReplicaEnvelope
        do { envelope = try ReplicaEnvelope(decoding: Array(message)) } catch {
            return APIError.badRequest("bad replication message: \(error)").response
        }
        guard replicaSet.withLock({ $0.contains(envelope.from) }) else {
            return APIError("BAD_REQUEST", "\(envelope.from) is not a replica of cluster \(configuration.name)", status: 403).response
        }
        guard let driver = drivers.withLock({ $0[envelope.log] }) else {
            return Self.unavailable("node \(configuration.node) is not replicating partition \(envelope.log) yet").response
        }
        // A store without records behind the compaction horizon (it started before the leader had data, or had none
        // then; its catalog may have tailed frames since) is seeded from files: the node restarts to copy them. A
        // store that holds records still halts (the replica).
        if case .compacted = envelope.message, holdsNoRecords {
            if !seedRequested.exchange(true, ordering: .relaxed) {
                ServerLog.note("partition \(envelope.log): \(envelope.from) compacted what this empty store lacks; restarting to seed it from files")
                restartContinuation.yield(RestartRequest(partition: Int(envelope.log), after: 0, seeded: true))
            }
            return HTTPResponse(status: 204, contentType: "application/octet-stream", body: [])
        }
        driver.feed(.receive(from: envelope.from, envelope.message, now: now()))
        return HTTPResponse(status: 204, contentType: "application/octet-stream", body: [])
    }

    /// `503 TRY_AGAIN_LATER` (SERVICE_UNAVAILABLE) with `retryAfter` 1, naming why.
    public static func unavailableResponse(_ reason: String) -> HTTPResponse { unavailable(reason).response }

    static func unavailable(_ reason: String) -> APIError {
        var e = APIError(CloudletError(.serviceUnavailable, reason))
        e.retryAfter = 1
        return e
    }

    // MARK: Writes

    private func write(_ request: HTTPRequest, next: (HTTPRequest) -> HTTPResponse) -> HTTPResponse {
        guard let driver = drivers.withLock({ $0[0] }) else {
            return Self.unavailable("node \(configuration.node) has not joined cluster \(configuration.name) yet").response
        }
        if driver.isLeader {
            var response = next(request)
            response.headers.append((Self.commitPositionHeader, commitPosition()))
            return response
        }
        guard let leader = driver.leader, leader.node != configuration.node else {
            return Self.unavailable("partition 0 has no leader at the moment (an election is under way)").response
        }
        if let from = request.queryParameter(Self.forwardedParameter) {
            return Self.unavailable("\(from) forwarded this write to \(configuration.node), which no longer leads; \(leader) does").response
        }
        guard let url = peers.withLock({ $0[leader.node] }) else {
            return Self.unavailable("the leader \(leader) has no address registered").response
        }
        return forward(request, to: url, leader: leader.node)
    }

    /// `partition:committed LSN` of every partition this node leads, comma-separated.
    func commitPosition() -> String {
        drivers.withLock { d in d.keys.sorted().map { "\($0):\(d[$0]!.status.committed)" } }.joined(separator: ",")
    }

    private func forward(_ request: HTTPRequest, to base: String, leader: NodeID) -> HTTPResponse {
        var query = request.query
        query += (query.isEmpty ? "" : "&") + Self.forwardedParameter + "=" + configuration.node.name
        var headers: [(name: String, value: String)] = [("Content-Type", "application/json")]
        if let v = request.authorization { headers.append(("Authorization", v)) }
        if let v = request.serverKeyID { headers.append(("X-Apple-CloudKit-Request-KeyID", v)) }
        if let v = request.serverKeyDate { headers.append(("X-Apple-CloudKit-Request-ISO8601Date", v)) }
        if let v = request.serverKeySignature { headers.append(("X-Apple-CloudKit-Request-SignatureV1", v)) }
        let outgoing = HTTPClientRequest(
            method: request.method, url: base + Self.percentEncodedPath(request.path) + "?" + query, headers: headers,
            body: request.body)
        let transport = forwardTransport
        do {
            let answer = try ThreadBridge.wait { try await transport.send(outgoing) }
            let relayed = answer.headers.filter {
                let n = $0.name.lowercased()
                return n == Self.commitPositionHeader.lowercased() || n == "retry-after"
            }
            return HTTPResponse(
                status: answer.status, contentType: answer.header("Content-Type") ?? "application/json; charset=utf-8",
                headers: relayed.map { ($0.name, $0.value) }, body: answer.body)
        } catch let failure as TransportFailure where failure.stage == .connecting {
            return Self.unavailable("the leader \(leader) at \(base) cannot be reached: \(failure.message)").response
        } catch {
            // The write may or may not have reached the leader: its outcome is unknown, as for any lost answer.
            return Self.unavailable("forwarding to the leader \(leader) at \(base) failed: \(error)").response
        }
    }

    static func percentEncodedPath(_ path: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "?#")
        return path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
    }

    // MARK: Read-your-writes

    /// Waits until every partition named in `position` (`p:lsn,…`) has applied that LSN here; nil when it has, the
    /// error to answer otherwise.
    private func waitForPosition(_ position: String) -> APIError? {
        var wanted: [(UInt32, UInt64)] = []
        for part in position.split(separator: ",") {
            let pair = part.split(separator: ":")
            guard pair.count == 2, let p = UInt32(pair[0]), let lsn = UInt64(pair[1]) else {
                return APIError.badRequest("\(Self.positionParameter) '\(position)' is not partition:LSN,…")
            }
            wanted.append((p, lsn))
        }
        let deadline = ContinuousClock.now + .seconds(5)
        for (p, lsn) in wanted {
            guard let driver = drivers.withLock({ $0[p] }) else { return Self.unavailable("partition \(p) is not replicated here") }
            while driver.log.durableLSN < lsn {
                if ContinuousClock.now >= deadline {
                    return Self.unavailable(
                        "node \(configuration.node) has applied partition \(p) up to LSN \(driver.log.durableLSN), not yet \(lsn)")
                }
                usleep(2_000)
            }
        }
        return nil
    }

    // MARK: Status

    /// Per replicated log, in Prometheus text format (``ServerConfiguration/additionalMetrics``: appended to
    /// `/cloudlet/metrics` and the console's Health page): this node's role and epoch, its durable and committed
    /// LSNs, each replica's lag behind the leader, and the leaderships won here.
    public func metricsText() -> String {
        var out = """
            # HELP cloudlet_cluster_leader 1 when this node leads the log.
            # TYPE cloudlet_cluster_leader gauge
            # HELP cloudlet_cluster_epoch The epoch of the log's current leader (etcd revision of its leader key).
            # TYPE cloudlet_cluster_epoch gauge
            # HELP cloudlet_cluster_durable_lsn The last LSN fsynced in this node's copy of the log.
            # TYPE cloudlet_cluster_durable_lsn gauge
            # HELP cloudlet_cluster_replica_lag_lsns How many LSNs a replica's published durable end trails the leader's.
            # TYPE cloudlet_cluster_replica_lag_lsns gauge
            # HELP cloudlet_cluster_compaction_horizon_lsn The LSN every replica holds, up to which this node may compact the log.
            # TYPE cloudlet_cluster_compaction_horizon_lsn gauge
            # HELP cloudlet_cluster_leaderships_total Leaderships this node won since it started.
            # TYPE cloudlet_cluster_leaderships_total counter
            # HELP cloudlet_cluster_replication_bytes_total Bytes of replication messages this node sent or received.
            # TYPE cloudlet_cluster_replication_bytes_total counter
            cloudlet_cluster_replication_bytes_total{direction="sent"} \(bytesSent.load(ordering: .relaxed))
            cloudlet_cluster_replication_bytes_total{direction="received"} \(bytesReceived.load(ordering: .relaxed))
            # HELP cloudlet_cluster_blobs_fetched_total Asset files this node fetched from other replicas.
            # TYPE cloudlet_cluster_blobs_fetched_total counter
            cloudlet_cluster_blobs_fetched_total \(blobsFetched.load(ordering: .relaxed))
            # HELP cloudlet_cluster_blob_bytes_fetched_total Bytes of the asset files this node fetched from other replicas.
            # TYPE cloudlet_cluster_blob_bytes_fetched_total counter
            cloudlet_cluster_blob_bytes_fetched_total \(blobBytesFetched.load(ordering: .relaxed))
            # HELP cloudlet_cluster_blobs_skipped_total Asset files of followed frames that no replica had (collected at the leader).
            # TYPE cloudlet_cluster_blobs_skipped_total counter
            cloudlet_cluster_blobs_skipped_total \(blobsSkipped.load(ordering: .relaxed))
            # HELP cloudlet_cluster_seed_bytes_total Bytes of store files this node copied from another replica to seed its empty store (received), or sent to seed another's (sent).
            # TYPE cloudlet_cluster_seed_bytes_total counter
            cloudlet_cluster_seed_bytes_total{direction="received"} \(Self.seedBytesReceived.load(ordering: .relaxed))
            cloudlet_cluster_seed_bytes_total{direction="sent"} \(seedBytesServed.load(ordering: .relaxed))

            """
        for (id, driver) in drivers.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            let s = driver.status
            let log = id == Catalog.logPartition ? "catalog" : String(id)
            var leading = false
            if case .leader = s.role { leading = true }
            out += "cloudlet_cluster_leader{log=\"\(log)\"} \(leading ? 1 : 0)\n"
            out += "cloudlet_cluster_epoch{log=\"\(log)\"} \(s.leader?.epoch ?? 0)\n"
            out += "cloudlet_cluster_durable_lsn{log=\"\(log)\"} \(s.durable.lsn)\n"
            out += "cloudlet_cluster_compaction_horizon_lsn{log=\"\(log)\"} \(s.compactionHorizon)\n"
            out += "cloudlet_cluster_leaderships_total{log=\"\(log)\"} \(s.failovers)\n"
            if let leader = s.leader, let leaderEnd = s.progress[leader.node] {
                for (node, end) in s.progress.sorted(by: { $0.key < $1.key }) {
                    let lag = leaderEnd.lsn > end.lsn ? leaderEnd.lsn - end.lsn : 0
                    out += "cloudlet_cluster_replica_lag_lsns{log=\"\(log)\",node=\"\(node)\"} \(lag)\n"
                }
            }
        }
        return out
    }

    /// This node's view: the replica set, every partition's leader and epoch, each replica's published durable end
    /// and lag behind the leader's.
    public func statusJSON() -> JSONValue {
        let replicas = replicaSet.withLock { $0 }
        let addresses = peers.withLock { $0 }
        let parts = drivers.withLock { $0 }.sorted { $0.key < $1.key }.map { id, driver in
            partitionJSON(id, driver.status, replicas: replicas)
        }
        let wishes = preferences.withLock { $0 }
        return .members([
            "cluster": .string(configuration.name), "node": .string(configuration.node.name),
            "ack": .string(configuration.ackMode.rawValue),
            "drained": .array(wishes.drained.sorted().map { .string($0.name) }),
            "preferredLeader": wishes.preferred.map { .string($0.name) },
            "nodes": .array(addresses.keys.sorted().map { .members(["node": .string($0.name), "url": .string(addresses[$0]!)]) }),
            "partitions": .array(parts),
        ])
    }

    private func partitionJSON(_ id: UInt32, _ s: PartitionDriver.Status, replicas: [NodeID]) -> JSONValue {
        let leaderEnd = s.leader.flatMap { s.progress[$0.node] }
        let role: String
        switch s.role {
        case .follower: role = "follower"
        case .candidate: role = "candidate"
        case .leader: role = "leader"
        }
        let replicaList: [JSONValue] = replicas.map { n in
            let end = s.progress[n]
            var lag: JSONValue?
            if let end, let leaderEnd { lag = .int(leaderEnd.lsn > end.lsn ? leaderEnd.lsn - end.lsn : 0) }
            return .members([
                "node": .string(n.name), "durableLSN": end.map { .int($0.lsn) }, "epoch": end.map { .int($0.epoch) },
                "lag": lag, "live": .bool(end != nil),
            ])
        }
        let name: JSONValue = id == Catalog.logPartition ? .string("catalog") : .int(id)
        return .members([
            "partition": name, "leader": s.leader.map { .string($0.node.name) }, "epoch": s.leader.map { .int($0.epoch) },
            "role": .string(role), "durableLSN": .int(s.durable.lsn), "committedLSN": .int(s.committed),
            "failovers": .int(s.failovers), "compactionHorizon": .int(s.compactionHorizon), "replicas": .array(replicaList),
        ])
    }
}

/// Reads a node's `/cloudlet/cluster/status` (for `cloudlet cluster status`).
public enum ClusterStatusClient {
    public static func fetch(url: String) async throws -> JSONValue {
        var options = CurlTransport.Options()
        options.timeout = 10
        options.connectTimeout = 3
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        let response: HTTPClientResponse
        do {
            response = try await CurlTransport(options: options).send(
                HTTPClientRequest(method: "GET", url: base + ClusterNode.statusPath))
        } catch let failure as TransportFailure {
            throw CloudletError(.serviceUnavailable, "cannot reach \(base): \(failure.message)")
        }
        guard response.status == 200, let json = try? JSONParser.parse(response.body) else {
            throw CloudletError(
                .serviceUnavailable,
                "\(base)\(ClusterNode.statusPath) answered \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))")
        }
        return json
    }
}
