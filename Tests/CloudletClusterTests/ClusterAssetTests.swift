import CloudletClient
import CloudletCore
import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

@testable import Cloudlet
@testable import CloudletCluster
@testable import CloudletServer

/// Asset files on a real cluster (three `cloudlet serve --cluster` processes, a real etcd): a quorum-acknowledged
/// record's file survives the loss of the leader that took the upload, a follower that was down (its store deleted,
/// so it catches up from zero) ends with every file, and `cloudlet-tool verify` finds every referenced file on
/// every node (docs/replication.md, "Assets").
@Suite(.serialized, .enabled(if: EtcdProcess.isInstalled, "etcd-server is not installed (.ci/install-deps)"))
struct ClusterAssetTests {
    /// Uploads `content` through `node` (the upload request is forwarded to the leader, whose upload URL it gets)
    /// and saves a `Photo` record `name` referencing it; returns the checksum once the save is acknowledged.
    private func savePhoto(_ cluster: ClusterHarness, via node: String, _ name: String, _ content: [UInt8]) async throws -> String {
        let tokens = try await cluster.post(node, "assets/upload", #"{"tokens":[{"recordType":"Photo","fieldName":"image"}]}"#)
        let url = try #require(try JSONParser.parse(tokens.body)["tokens"]?.arrayValue?.first?["url"]?.stringValue, "\(tokens.status)")
        let up = try await cluster.http.send(
            HTTPClientRequest(method: "POST", url: url, headers: [("Content-Type", "application/octet-stream")], body: content))
        #expect(up.status == 200, "upload: \(String(decoding: up.body.prefix(300), as: UTF8.self))")
        let file = try #require(try JSONParser.parse(up.body)["singleFile"])
        let save = """
            {"operations":[{"operationType":"create","record":{"recordName":"\(name)","recordType":"Photo",\
            "fields":{"image":{"value":\(file.serialized()),"type":"ASSETID"}}}}]}
            """
        let r = try await cluster.post(node, "records/modify", save)
        let record = try JSONParser.parse(r.body)["records"]?.arrayValue?.first
        #expect(r.status == 200 && record?["serverErrorCode"] == nil, "save: \(String(decoding: r.body.prefix(400), as: UTF8.self))")
        return try #require(file["fileChecksum"]?.stringValue)
    }

    /// The record's download URL as `node` signs it (a lookup there), `${f}` filled in.
    private func downloadURL(_ cluster: ClusterHarness, _ node: String, _ name: String) async throws -> String {
        let r = try await cluster.post(node, "records/lookup", #"{"records":[{"recordName":"\#(name)"}]}"#)
        let url = try #require(
            try JSONParser.parse(r.body)["records"]?.arrayValue?.first?["fields"]?["image"]?["value"]?["downloadURL"]?.stringValue,
            "lookup of \(name) on \(node): \(String(decoding: r.body.prefix(400), as: UTF8.self))")
        return url.replacingOccurrences(of: "${f}", with: "photo.jpg")
    }

    /// The record's file as `node` serves it (a lookup there, then its download URL).
    private func download(_ cluster: ClusterHarness, _ node: String, _ name: String) async throws -> [UInt8] {
        let got = try await cluster.http.send(HTTPClientRequest(method: "GET", url: try await downloadURL(cluster, node, name)))
        #expect(got.status == 200, "download of \(name) on \(node): \(got.status)")
        return got.body
    }

    private func content(_ seed: UInt64, _ count: Int) -> [UInt8] {
        var random = SeededRandom(seed: seed)
        var out: [UInt8] = []
        out.reserveCapacity(count + 8)
        while out.count < count { withUnsafeBytes(of: random.next()) { out += $0 } }
        return Array(out.prefix(count))
    }

    /// Whether the blob is in the (stopped or running) node's store under its name.
    private func hasBlob(_ cluster: ClusterHarness, _ node: String, _ checksum: String) -> Bool {
        FileManager.default.fileExists(atPath: cluster.store(node) + "/assets/sha256/\(checksum.prefix(2))/\(checksum)")
    }

    /// A started cluster, its leader, and its two followers (`down`: the one the test takes down).
    private func started() async throws -> (ClusterHarness, leader: String, down: String, up: String) {
        let cluster = try await ClusterHarness()
        try await cluster.startAll()
        let leader = try await cluster.leader()
        let followers = cluster.names.filter { $0 != leader }
        return (cluster, leader, followers[0], followers[1])
    }

    @Test func aQuorumAcknowledgedAssetSurvivesTheLeaderAndAFollowerCatchingUpFromZeroGetsEveryFile() async throws {
        let (cluster, leader, down, up) = try await started()
        defer { withExtendedLifetime(cluster) {} }
        // One follower is down, its store gone: the leader and the other follower are the quorum.
        await cluster.kill(down)
        try FileManager.default.removeItem(atPath: cluster.store(down))
        let first = content(1, 3_000_000)
        let firstChecksum = try await savePhoto(cluster, via: up, "p1", first)
        #expect(hasBlob(cluster, up, firstChecksum), "the follower in the quorum holds the file once the save is acknowledged")

        // Back, from an empty store: it tails the log from LSN 1, and the files come along.
        try await cluster.start(down)
        try await cluster.waitConverged()
        #expect(hasBlob(cluster, down, firstChecksum), "the follower that caught up has the file")

        // A second asset, then the leader is killed at once: the new leader serves both files.
        let second = content(2, 1_000_001)
        let secondChecksum = try await savePhoto(cluster, via: leader, "p2", second)
        await cluster.kill(leader)
        let next = try await cluster.leader(not: leader)
        #expect(SHA256Stream.hex(of: try await download(cluster, next, "p1")) == SHA256Stream.hex(of: first))
        #expect(SHA256Stream.hex(of: try await download(cluster, next, "p2")) == secondChecksum)

        // A download URL signed by the new leader, kept for later.
        let signedByNext = try await downloadURL(cluster, next, "p2")

        // The old leader returns; every node ends with every file, and `verify` finds them all.
        try await cluster.start(leader)
        _ = try await cluster.createRetrying(next, "after")  // a write of the new epoch commits the older frames
        try await cluster.waitConverged()
        // Every node signs asset URLs with the cluster's key: the URL another node signed (before this one
        // restarted) works here too, as behind a load balancer; changed by one byte, it is refused.
        let path = String(signedByNext.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" })
        let elsewhere = try await cluster.http.send(HTTPClientRequest(method: "GET", url: cluster.url(leader) + path))
        #expect(elsewhere.status == 200 && SHA256Stream.hex(of: elsewhere.body) == secondChecksum, "\(elsewhere.status) for \(path)")
        let token = path.dropLast("/photo.jpg".count)  // …/<payload>.<signature>
        let forged = token.dropLast() + (token.hasSuffix("A") ? "B" : "A") + "/photo.jpg"
        let refused = try await cluster.http.send(HTTPClientRequest(method: "GET", url: cluster.url(leader) + forged))
        #expect(refused.status == 403, "\(refused.status) for a changed signature")
        await cluster.stopAll()
        for node in cluster.names {
            #expect(hasBlob(cluster, node, firstChecksum) && hasBlob(cluster, node, secondChecksum), "\(node) lacks a file")
            let verify = try await ChildProcess.run(try builtExecutable("cloudlet-tool"), ["verify", "--deep", "--data", cluster.store(node)])
            #expect(verify.status == 0, "verify \(node): \(verify.out.suffix(10)) \(verify.err.suffix(10))")
        }
        await cluster.etcd.stop()
    }

    /// A node started with an empty store seeds itself from the leader's files (docs/replication.md, "Seeding a node
    /// from files"): killed part-way through the copy, it is left empty (the staged copy is discarded at the next
    /// start, never opened); the copy then completes, brings the asset files along, and the seeded node alone serves
    /// the asset and holds every acknowledged record.
    @Test func anEmptyNodeSeedsFromFilesAndServesTheAssetAndACrashMidSeedLeavesItEmpty() async throws {
        let (cluster, leader, down, up) = try await started()
        defer { withExtendedLifetime(cluster) {} }
        await cluster.kill(down)
        try FileManager.default.removeItem(atPath: cluster.store(down))
        let photo = content(5, 300_000)
        let checksum = try await savePhoto(cluster, via: leader, "photo", photo)
        var acked: Set<String> = []
        for i in 0..<30 where await cluster.create(leader, "s\(i)", value: "v\(i)").acked { acked.insert("s\(i)") }
        #expect(acked.count == 30)

        // Killed after the first chunk of the copy: a staged copy without its COMPLETE mark, and an empty store.
        var environment = ProcessInfo.processInfo.environment
        environment["CLOUDLET_CRASH_AT"] = "seed.chunk"
        let crashed = try await cluster.startUntilExit(down, timeout: 60, environment: environment)
        #expect(crashed.status == SIGKILL, "the node died at the crash point: \(crashed.status) \(crashed.stderr.suffix(5))")
        let staging = cluster.store(down) + "/seeding"
        #expect(FileManager.default.fileExists(atPath: staging) && !FileManager.default.fileExists(atPath: staging + "/COMPLETE"))
        #expect(try await cluster.recordNames(down).isEmpty, "the store of a node killed mid-seed holds nothing")

        try await cluster.start(down)
        try await cluster.waitConverged()
        let lines = cluster.stderr(down)
        #expect(lines.contains { $0.contains("discarded an interrupted seed") }, "\(lines.suffix(8))")
        #expect(lines.contains { $0.contains("seeded from \(leader)") }, "\(lines.suffix(8))")
        #expect(!FileManager.default.fileExists(atPath: staging))
        #expect(hasBlob(cluster, down, checksum), "the seed brought the asset file")

        // The others stop: the seeded node serves the record and its file from its own store.
        await cluster.kill(leader, SIGTERM)
        await cluster.kill(up, SIGTERM)
        #expect(SHA256Stream.hex(of: try await download(cluster, down, "photo")) == checksum)
        await cluster.stopAll()
        let names = try await cluster.recordNames(down)
        #expect(acked.subtracting(names).isEmpty, "the seeded node lacks \(acked.subtracting(names).sorted().prefix(5))")
        var hashes: Set<String> = []
        for n in cluster.names { hashes.insert(try await cluster.contentHash(n)) }
        #expect(hashes.count == 1, "the seeded replica's content differs: \(hashes)")
        await cluster.etcd.stop()
    }

    /// `POST /cloudlet/cluster/blob` as another node sends it: the body `<node>\n<checksum>`, sealed with the
    /// cluster's message key (read from etcd, as the nodes do).
    private func askForBlob(_ cluster: ClusterHarness, _ node: String, as asker: String, _ checksum: String, sealed: Bool = true)
        async throws -> HTTPClientResponse
    {
        let stored = try #require(try await EtcdClient(url: cluster.etcd.url).get("/cloudlet/key"))
        let hex = Array(String(decoding: stored.value, as: UTF8.self).utf8)
        let key = stride(from: 0, to: hex.count - 1, by: 2).map { UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16)! }
        let message = Array("\(asker)\n\(checksum)".utf8)
        let body = sealed ? MessageAuthenticator(key: key).seal(message) : [UInt8](repeating: 0, count: 32) + message
        return try await cluster.http.send(HTTPClientRequest(method: "POST", url: cluster.url(node) + "/cloudlet/cluster/blob", body: body))
    }

    @Test func peersGetBlobsOnlyWithTheClusterKeyAndABlobTheLeaderCollectedDoesNotWedgeAFollower() async throws {
        let (cluster, leader, down, up) = try await started()
        defer { withExtendedLifetime(cluster) {} }
        let kept = content(3, 200_000)
        let keptChecksum = try await savePhoto(cluster, via: leader, "kept", kept)

        // The endpoint: the file to a replica; 404 for a file the node lacks; 403 for a node outside the replica
        // set; 401 without the cluster's key.
        let served = try await askForBlob(cluster, leader, as: up, keptChecksum)
        #expect(served.status == 200 && served.body == kept)
        #expect(try await askForBlob(cluster, leader, as: up, String(repeating: "ab", count: 32)).status == 404)
        #expect(try await askForBlob(cluster, leader, as: "stranger", keptChecksum).status == 403)
        let unsealed = try await askForBlob(cluster, leader, as: up, keptChecksum, sealed: false)
        #expect(unsealed.status == 401 && unsealed.body.count < 1000)

        // A follower is down while a record with a file is saved and deleted, and the other two collect the file
        // (offline, no grace window): when the follower returns, the frame that references it finds it nowhere.
        await cluster.kill(down)
        let gone = try await savePhoto(cluster, via: leader, "gone", content(4, 100_000))
        let delete = #"{"operations":[{"operationType":"forceDelete","record":{"recordName":"gone"}}]}"#
        let deleted = try await cluster.post(leader, "records/modify", delete)
        #expect(deleted.status == 200, "\(String(decoding: deleted.body.prefix(300), as: UTF8.self))")
        await cluster.stopAll()
        try await Task.sleep(for: .seconds(1.1))
        for node in [leader, up] {
            let gc = try await ChildProcess.run(try builtExecutable("cloudlet-tool"), ["gc", "--grace", "0", "--data", cluster.store(node)])
            #expect(gc.status == 0, "gc \(node): \(gc.out) \(gc.err)")
            #expect(!hasBlob(cluster, node, gone) && hasBlob(cluster, node, keptChecksum))
        }
        for node in [leader, up, down] { try await cluster.start(node) }
        let next = try await cluster.leader()
        _ = try await cluster.createRetrying(next, "after")
        // It skips the file (the leader has none: no live record references it there) and follows on.
        try await cluster.waitConverged()
        #expect(!hasBlob(cluster, down, gone) && hasBlob(cluster, down, keptChecksum))
        await cluster.stopAll()
        let verify = try await ChildProcess.run(try builtExecutable("cloudlet-tool"), ["verify", "--data", cluster.store(down)])
        #expect(verify.status == 0, "verify \(down): \(verify.out.suffix(10)) \(verify.err.suffix(10))")
        await cluster.etcd.stop()
    }
}
