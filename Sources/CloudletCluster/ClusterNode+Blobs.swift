import Cloudlet
import CloudletClient
import CloudletConcurrency
import CloudletCore
import CloudletReplication
import CloudletServer
import CloudletWire
import Foundation

/// Asset files between replicas (docs/replication.md, "Assets"): a follower holds every blob that the records of the
/// frames it appends reference, fsynced and named, before it appends them — so before it reports them durable, and so
/// before its vote counts towards a quorum acknowledgement. Missing ones it fetches from the leader (or another
/// replica) through `POST /cloudlet/cluster/blob`.
///
/// The request's body is the asking node's name and the checksum (`<node>\n<checksum>`), sealed with the cluster's
/// message key like every replication message (``MessageAuthenticator``): only replicas of this cluster get blobs.
/// The answer is the file (`200`, streamed by the front end's loop from the blob, `Content-Length` its size), or
/// `404 NOT_FOUND` when this node does not have it.
extension ClusterNode {
    static let blobPath = "/cloudlet/cluster/blob"

    /// `POST /cloudlet/cluster/blob`: a blob, to a replica of this cluster.
    func serveBlob(_ request: HTTPRequest) -> HTTPResponse {
        let message: ArraySlice<UInt8>
        switch openPeerRequest(request, Self.blobPath, "blob request") {
        case .success(let opened): message = opened.message
        case .failure(let refusal): return refusal.response
        }
        let parts = String(decoding: message, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard parts.count == 2, BlobStore.isChecksum(String(parts[1])) else {
            return APIError.badRequest("a blob request is '<node>\\n<checksum>'").response
        }
        let from = NodeID(String(parts[0]))
        guard replicaSet.withLock({ $0.contains(from) }) else {
            return APIError("BAD_REQUEST", "\(from) is not a replica of cluster \(configuration.name)", status: 403).response
        }
        let checksum = String(parts[1])
        let file: BlobReader
        do { file = try BlobReader(store.assets, checksum) } catch let e as CloudletError where e.code == .unknownItem {
            return APIError("NOT_FOUND", "asset \(checksum) is not in the store of \(configuration.node)", status: 404).response
        } catch {
            return APIError(error as? CloudletError ?? CloudletError(.io, "opening asset \(checksum): \(error)")).response
        }
        return .blob(file, range: 0..<file.size, headers: [("ETag", "\"\(checksum)\"")])
    }

    /// Why a request from another node is refused (``openPeerRequest(_:_:_:)``).
    struct PeerRefusal: Error {
        var response: HTTPResponse
    }

    /// The body of a `POST` from another node to `path`, opened with the cluster's message key (and the key, to seal
    /// an answer with); else the answer refusing it: not a POST, the node has not joined yet (no key), or not sealed
    /// with the cluster's key (`AUTHENTICATION_FAILED`).
    func openPeerRequest(_ request: HTTPRequest, _ path: String, _ what: String)
        -> Result<(sealer: MessageAuthenticator, message: ArraySlice<UInt8>), PeerRefusal>
    {
        guard request.method == "POST" else { return .failure(PeerRefusal(response: APIError.badRequest("\(path) takes POST").response)) }
        guard let sealer = authenticator.withLock({ $0 }) else {
            return .failure(
                PeerRefusal(response: Self.unavailable("node \(configuration.node) has not joined cluster \(configuration.name) yet").response))
        }
        guard let message = sealer.open(request.body) else {
            return .failure(
                PeerRefusal(
                    response: APIError("AUTHENTICATION_FAILED", "\(what) not sealed with the key of cluster \(configuration.name)").response))
        }
        return .success((sealer, message))
    }

    /// What asking one peer for a blob gave.
    enum BlobFetch: Equatable {
        /// It is in this node's store now, whole, named and durable.
        case stored
        /// The peer does not have it (`404`).
        case absent
        /// No answer, another answer, or a copy that did not hash to its name (nothing kept).
        case failed(String)
    }

    /// Asks `peer` for the blob and stores it: streamed to a file under `assets/tmp/`, checked against the asset's
    /// size and checksum, then named like any blob (``BlobStore/adopt(_:checksum:size:)``). Blocking.
    func fetchBlob(_ asset: AssetReference, from peer: NodeID) -> BlobFetch {
        guard let base = peers.withLock({ $0[peer] }) else { return .failed("\(peer) has no address registered") }
        guard let sealer = authenticator.withLock({ $0 }) else { return .failed("this node has not joined the cluster") }
        let blobs = store.assets
        let temp: String
        do { temp = try blobs.temporaryPath() } catch { return .failed("\(error)") }
        let request = HTTPClientRequest(
            method: "POST", url: base + Self.blobPath, headers: [("Content-Type", "application/octet-stream")],
            body: sealer.seal(Array("\(configuration.node.name)\n\(asset.fileChecksum)".utf8)), responseFile: temp)
        let transport = blobTransport
        let answer: HTTPClientResponse
        do { answer = try ThreadBridge.wait { try await transport.send(request) } } catch {
            try? FileManager.default.removeItem(atPath: temp)
            return .failed("\(error)")
        }
        guard answer.status == 200 else {
            try? FileManager.default.removeItem(atPath: temp)
            if answer.status == 404 { return .absent }
            return .failed("answered \(answer.status): \(String(decoding: answer.body.prefix(200), as: UTF8.self))")
        }
        do { try blobs.adopt(temp, checksum: asset.fileChecksum, size: asset.size) } catch { return .failed("\(error)") }
        blobsFetched.add(1, ordering: .relaxed)
        blobBytesFetched.add(Int(asset.size), ordering: .relaxed)
        return .stored
    }

    /// Makes sure every blob `assets` name is in this node's store, fsynced and named, fetching the missing ones
    /// (the leader first, then the other replicas); returns their checksums **pinned** (``BlobStore/pin(_:)``: no
    /// collection here takes them before the frames referencing them are applied): unpin them after. Blocking.
    ///
    /// A blob no peer can give is skipped, with a warning, when the leader answered that it does not have it, or
    /// every other replica did: a leader collects only blobs that no live record references there (a later frame
    /// deleted or replaced the record, and this node will apply that frame too), and it has every blob of the frames
    /// it writes (a save makes them durable before it commits). Anything else — a peer that did not answer, a bad
    /// copy — throws `SERVICE_UNAVAILABLE`: the frames are not appended, and are fetched and tried again.
    func ensureBlobs(_ assets: [AssetReference], leader: NodeID?) throws -> [String] {
        let blobs = store.assets
        let wanted = assets.filter { BlobStore.isChecksum($0.fileChecksum) }
        let checksums = wanted.map(\.fileChecksum)
        let missing = Set(blobs.pin(checksums))
        do {
            for asset in wanted where missing.contains(asset.fileChecksum) { try fetchMissing(asset, leader: leader) }
            // Blobs this node had already may be renamed but not yet synced (an upload no save here referenced).
            try blobs.makeDurable(checksums)
        } catch {
            blobs.unpin(checksums)
            throw error
        }
        return checksums
    }

    private func fetchMissing(_ asset: AssetReference, leader: NodeID?) throws {
        let me = configuration.node
        var order: [NodeID] = []
        if let leader, leader != me { order.append(leader) }
        order += replicaSet.withLock { $0 }.filter { $0 != me && !order.contains($0) }
        var absent: [NodeID] = []
        var problems: [String] = []
        for peer in order {
            switch fetchBlob(asset, from: peer) {
            case .stored: return
            case .absent: absent.append(peer)
            case .failed(let why): problems.append("\(peer): \(why)")
            }
        }
        let leaderHasNone = leader.map { $0 != me && absent.contains($0) } ?? false
        if leaderHasNone || problems.isEmpty {
            blobsSkipped.add(1, ordering: .relaxed)
            ServerLog.warning(
                "asset \(asset.fileChecksum) (\(asset.size) bytes) is on no replica asked (\(absent.map(\.name).joined(separator: ", "))): "
                    + "skipped; a leader only collects blobs no live record references there")
            return
        }
        throw CloudletError(
            .serviceUnavailable,
            "asset \(asset.fileChecksum) (\(asset.size) bytes) could not be fetched: \(problems.joined(separator: "; "))")
    }
}
