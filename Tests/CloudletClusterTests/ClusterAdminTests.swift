import CloudletClient
import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

/// `cloudlet cluster drain|undrain|promote` on three real nodes and a real etcd, and the sealing of replication
/// messages as a stranger meets it.
@Suite(.serialized, .enabled(if: EtcdProcess.isInstalled, "etcd-server is not installed (.ci/install-deps)"))
struct ClusterAdminTests {
    @Test func drainingTheLeaderHandsItOverAndAPromotedNodeTakesTheLead() async throws {
        let cluster = try await ClusterHarness()
        try await cluster.startAll()
        defer { withExtendedLifetime(cluster) {} }
        let etcd = cluster.etcd.url.replacingOccurrences(of: "http://", with: "etcd://")
        func admin(_ args: [String]) async throws -> (status: Int32, out: [String], err: [String]) {
            try await ChildProcess.run(try cloudletExecutable(), ["cluster"] + args + ["--etcd", etcd])
        }
        func leads(_ node: String) async -> Bool {
            await cluster.status(node)?["partitions"]?.arrayValue?.first?["role"]?.stringValue == "leader"
        }
        func waitUntilLeads(_ node: String) async throws {
            let deadline = Date().addingTimeInterval(30)
            while await !leads(node) {
                guard Date() < deadline else { throw ChildProcess.Failure(message: "\(node) never led; \(cluster.diagnostics())") }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        var written: [String] = []
        func write(_ name: String, via node: String) async throws {
            if try await cluster.createRetrying(node, name) { written.append(name) }
        }

        let first = try await cluster.leader()
        try await write("before", via: first)

        let drain = try await admin(["drain", first])
        #expect(drain.status == 0, "\(drain.err)")
        #expect(drain.out.last == "drained: \(first); preferred leader: none", "\(drain.out)")
        let second = try await cluster.leader(not: first)
        // The drained node does not take the lead back while the others are live; writes sent to it are forwarded.
        for i in 0..<20 {
            #expect(await !leads(first), "drained \(first) leads again")
            try await write("drained-\(i)", via: first)
        }
        let status = try #require(await cluster.status(first))
        #expect(status["drained"]?.arrayValue?.compactMap(\.stringValue) == [first])

        let third = try #require(cluster.names.first { $0 != first && $0 != second })
        let promote = try await admin(["promote", third])
        #expect(promote.status == 0, "\(promote.err)")
        try await waitUntilLeads(third)
        try await write("promoted", via: second)
        let firstLeads = await leads(first), secondLeads = await leads(second)
        #expect(!firstLeads && !secondLeads)

        // Draining every replica but the last is refused unless forced; a stranger's name is refused.
        #expect(try await admin(["drain", second]).status == 0)
        let last = try await admin(["drain", third])
        #expect(last.status != 0)
        #expect(last.err.joined().contains("would leave no replica"), "\(last.err)")
        let stranger = try await admin(["drain", "n9"])
        #expect(stranger.status != 0)
        #expect(stranger.err.joined().contains("n9 is not a replica"), "\(stranger.err)")
        #expect(try await admin(["undrain", first]).status == 0)
        #expect(try await admin(["undrain", second]).status == 0)
        let cleared = try JSONParser.parse(Array((try await admin(["promote", "--none", "--json"]).out.last ?? "").utf8))
        #expect(cleared["drained"]?.arrayValue?.isEmpty == true)
        #expect(cleared["preferredLeader"]?.stringValue == nil)

        // Nothing acknowledged was lost through the handovers, on any node.
        try await cluster.waitConverged()
        await cluster.stopAll()
        for node in cluster.names {
            let names = try await cluster.recordNames(node)
            #expect(Set(written).isSubset(of: names), "\(node) lacks \(Set(written).subtracting(names).sorted())")
        }
    }

    @Test func aReplicationMessageNotSealedWithTheClustersKeyIsRefused() async throws {
        let cluster = try await ClusterHarness()
        try await cluster.startAll()
        defer { withExtendedLifetime(cluster) {} }
        let node = cluster.names[0]
        // A well-formed envelope body from "n2" but without the cluster key's tag: a stranger on the network.
        let forged = try await cluster.http.send(
            HTTPClientRequest(
                method: "POST", url: cluster.url(node) + "/cloudlet/cluster/message",
                headers: [("Content-Type", "application/octet-stream")], body: Array(repeating: 0x41, count: 96)))
        #expect(forged.status == 401)
        let error = try JSONParser.parse(forged.body)
        #expect(error["serverErrorCode"]?.stringValue == "AUTHENTICATION_FAILED")
        #expect(error["reason"]?.stringValue?.contains("not sealed with the key of cluster") == true)
        // The real nodes' messages pass: the cluster replicates, and the metrics count the bytes.
        _ = try await cluster.leader()
        #expect(await cluster.create(node, "sealed", value: "x").acked)
        try await cluster.waitConverged()
        let metrics = try await cluster.http.send(
            HTTPClientRequest(
                method: "GET", url: cluster.url(node) + "/cloudlet/metrics", headers: [("Authorization", "Bearer \(cluster.admin)")]))
        #expect(metrics.status == 200)
        let text = String(decoding: metrics.body, as: UTF8.self)
        for direction in ["sent", "received"] {
            let line = text.split(separator: "\n").first { $0.hasPrefix("cloudlet_cluster_replication_bytes_total{direction=\"\(direction)\"}") }
            let bytes = line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
            #expect(bytes > 0, "\(direction): \(line ?? "no line")")
        }
        await cluster.stopAll()
    }
}
