import Cloudlet
import CloudletClient
import CloudletCore
import CloudletTestSupport
import CloudletWire
import Foundation
import Synchronization
import Testing

/// Three `cloudlet serve --cluster` processes and a real etcd on loopback. `.serialized`: each test runs a cluster
/// of processes; two at once would only slow both on a 2-core machine.
@Suite(.serialized, .enabled(if: EtcdProcess.isInstalled, "etcd-server is not installed (.ci/install-deps)"))
struct ClusterFailoverTests {
    @Test func writesOnAnyNodeReachTheLeaderAndAreReadOnEveryNode() async throws {
        let cluster = try await ClusterHarness()
        try await cluster.startAll()
        defer { withExtendedLifetime(cluster) {} }
        let leader = try await cluster.leader()
        var positions: [String] = []
        for (i, node) in cluster.names.enumerated() {
            let (acked, response) = await cluster.create(node, "r\(i)", value: "from \(node)")
            #expect(acked, "a write on \(node) (leader \(leader)) was not acknowledged: \(String(decoding: response?.body ?? [], as: UTF8.self))")
            let position = try #require(response?.header("X-Cloudlet-Commit-Position"))
            #expect(position.hasPrefix("0:"))
            positions.append(position)
        }
        // Read-your-writes: a read carrying the last position back sees every write on every node.
        for node in cluster.names {
            let r = try await cluster.post(
                node, "records/lookup", #"{"records":[{"recordName":"r0"},{"recordName":"r1"},{"recordName":"r2"}]}"#,
                query: "cloudletPosition=" + positions.last!)
            let records = try JSONParser.parse(r.body)["records"]?.arrayValue ?? []
            #expect(records.compactMap { $0["recordName"]?.stringValue } == ["r0", "r1", "r2"], "on \(node)")
            #expect(records.allSatisfy { $0["serverErrorCode"] == nil }, "on \(node): \(records)")
        }
        let status = try #require(await cluster.status(cluster.names[0]))
        let partition = try #require(status["partitions"]?.arrayValue?.first)
        #expect(partition["leader"]?.stringValue == leader)
        #expect((partition["epoch"]?.int64Value ?? 0) > 0)
        #expect(partition["replicas"]?.arrayValue?.count == 3)
        // The same view from the command line.
        let cli = try await ChildProcess.run(try cloudletExecutable(), ["cluster", "status", "--url", cluster.url(cluster.names[0])])
        #expect(cli.status == 0)
        #expect(cli.out.contains { $0.hasPrefix("partition 0: leader \(leader), epoch ") }, "\(cli.out)")
        #expect(cli.out.contains { $0.hasPrefix("catalog: leader \(leader)") }, "\(cli.out)")
        await cluster.stopAll()
    }

    @Test func aStoreOfFourPartitionsIsLedFromOneNodeAndReplicatedWhole() async throws {
        let cluster = try await ClusterHarness()
        defer { withExtendedLifetime(cluster) {} }
        // Stores created with 4 partitions before the nodes start (the count is fixed at creation).
        for n in cluster.names {
            var c = StoreConfiguration()
            c.partitions = 4
            try await CloudletStore.open(at: cluster.store(n), configuration: c).close()
        }
        try await cluster.startAll()
        _ = try await cluster.leader()
        // Custom zones land in different partitions; writes on every node.
        let zones = (0..<8).map { "z\($0)" }
        let zoneOps = zones.map { #"{"operationType":"create","zone":{"zoneID":{"zoneName":"\#($0)"}}}"# }.joined(separator: ",")
        let made = try await cluster.post(cluster.names[1], "zones/modify", #"{"operations":[\#(zoneOps)]}"#)
        #expect(made.status == 200, "\(String(decoding: made.body, as: UTF8.self))")
        for (i, zone) in zones.enumerated() {
            let body = """
                {"operations":[{"operationType":"create","record":{"recordName":"r\(i)","recordType":"Item","fields":{"v":{"value":"x"}}}}],
                 "zoneID":{"zoneName":"\(zone)"}}
                """
            let r = try await cluster.post(cluster.names[i % 3], "records/modify", body)
            let record = try JSONParser.parse(r.body)["records"]?.arrayValue?.first
            #expect(r.status == 200 && record?["serverErrorCode"] == nil, "\(String(decoding: r.body, as: UTF8.self))")
        }
        let status = try #require(await cluster.status(cluster.names[0]))
        let leaders = Set((status["partitions"]?.arrayValue ?? []).compactMap { $0["leader"]?.stringValue })
        #expect(leaders.count == 1, "every log is led from one node: \(status.serialized())")
        #expect(status["partitions"]?.arrayValue?.count == 5)
        try await cluster.waitConverged(logs: 5)
        await cluster.stopAll()
        let hashes = try await cluster.names.asyncMap { try await cluster.contentHash($0) }
        #expect(Set(hashes).count == 1)
        #expect(try await cluster.recordNames(cluster.names[0]).count == 8)
    }

    @Test func aStoreOfAnotherClusterIsRefusedNamingBoth() async throws {
        let first = try await ClusterHarness(nodes: 1)
        let dir = TempDir("other-cluster")
        defer { withExtendedLifetime((first, dir)) {} }
        let store = dir.sub("store")
        let etcdURL = first.etcd.url.replacingOccurrences(of: "http://", with: "etcd://")
        let args = ["serve", "--data", store, "--port", "0", "--cluster", etcdURL, "--node", "x", "--replicas", "1"]
        let joined = try ChildProcess(try cloudletExecutable(), args)
        _ = try await joined.waitForLine(timeout: 60) { $0.hasPrefix("cloudlet: serving store") }
        await joined.stop(SIGTERM)
        // The same store pointed at another cluster (another etcd).
        let other = try await EtcdProcess(directory: dir.sub("etcd2"))
        let refused = try await ChildProcess.run(
            try cloudletExecutable(),
            ["serve", "--data", store, "--port", "0", "--cluster", other.url, "--node", "x", "--replicas", "1"])
        #expect(refused.status != 0)
        #expect(refused.err.contains { $0.contains("belongs to cluster cloudlet") && $0.contains(other.url) }, "\(refused.err)")
        await other.stop()
        await first.abandon()
    }

    @Test func underAckLeaderWritesAreAcknowledgedAndReplicated() async throws {
        let cluster = try await ClusterHarness(extraArguments: ["--ack", "leader"])
        try await cluster.startAll()
        defer { withExtendedLifetime(cluster) {} }
        let leader = try await cluster.leader()
        for i in 0..<20 { #expect(await cluster.create(cluster.names[i % 3], "l\(i)", value: "v").acked) }
        let status = try #require(await cluster.status(leader))
        #expect(status["ack"]?.stringValue == "leader")
        try await cluster.waitConverged()
        await cluster.stopAll()
        let hashes = try await cluster.names.asyncMap { try await cluster.contentHash($0) }
        #expect(Set(hashes).count == 1)
        #expect(try await cluster.recordNames(cluster.names[2]).isSuperset(of: (0..<20).map { "l\($0)" }))
    }

    @Test func withoutEtcdWritesAreRefusedWithRetryAfterAndResumeWhenItIsBack() async throws {
        let cluster = try await ClusterHarness()
        try await cluster.startAll()
        defer { withExtendedLifetime(cluster) {} }
        // Stop etcd: the leader cannot renew its lease, steps down before it can expire, and no one can be elected.
        await cluster.etcd.stop()
        let node = cluster.names[0]
        let deadline = Date().addingTimeInterval(30)
        var last: HTTPClientResponse?
        while Date() < deadline {
            let (acked, r) = await cluster.create(node, "x\(Int.random(in: 0..<1_000_000))", value: "x")
            last = r
            if !acked, let r, r.status == 503 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        let response = try #require(last)
        #expect(response.status == 503)
        let json = try JSONParser.parse(response.body)
        #expect(json["serverErrorCode"]?.stringValue == "TRY_AGAIN_LATER")
        #expect((json["retryAfter"]?.int64Value ?? 0) >= 1)
        #expect(response.header("Retry-After") != nil)
        // Reads go on locally meanwhile.
        let read = try await cluster.post(node, "records/lookup", #"{"records":[{"recordName":"nothing"}]}"#)
        #expect(read.status == 200)
        // Once etcd is back, a leader is elected again and writes are acknowledged.
        try await cluster.etcd.restart()
        let back = Date().addingTimeInterval(40)
        var acked = false
        while !acked, Date() < back {
            acked = await cluster.create(node, "back\(Int.random(in: 0..<1_000_000))", value: "y").acked
            if !acked { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(acked, "no write acknowledged after etcd restarted; \(cluster.diagnostics())")
        await cluster.abandon()
    }

    @Test func aFollowerStoppedLongerThanItsLeaseCatchesUp() async throws {
        let cluster = try await ClusterHarness()
        try await cluster.startAll()
        defer { withExtendedLifetime(cluster) {} }
        let leader = try await cluster.leader()
        let follower = cluster.names.first { $0 != leader }!
        cluster.signal(follower, SIGSTOP)
        // Writes go on with the other two; the stopped node's lease lapses meanwhile (TTL 2 s).
        var acked = 0
        for i in 0..<30 {
            if await cluster.create(leader, "during\(i)", value: "z").acked { acked += 1 }
        }
        try await Task.sleep(for: .seconds(3))
        #expect(acked == 30)
        cluster.signal(follower, SIGCONT)
        try await cluster.waitConverged()
        await cluster.stopAll()
        let names = try await cluster.recordNames(follower)
        #expect(names.isSuperset(of: (0..<30).map { "during\($0)" }))
        #expect(try await cluster.contentHash(follower) == (try await cluster.contentHash(leader)))
    }

    @Test func aLeaderStoppedPastItsLeaseIsReplacedAndRejoinsWithoutLosingAcknowledgedWrites() async throws {
        let cluster = try await ClusterHarness()
        try await cluster.startAll()
        defer { withExtendedLifetime(cluster) {} }
        let old = try await cluster.leader()
        let others = cluster.names.filter { $0 != old }
        for i in 0..<10 { #expect(await cluster.create(others[i % 2], "before\(i)", value: "a").acked) }
        cluster.signal(old, SIGSTOP)
        // Its lease lapses (TTL 2 s); another node leads and takes writes.
        let new = try await cluster.leader(not: old)
        var acked: [String] = []
        let deadline = Date().addingTimeInterval(30)
        while acked.count < 10, Date() < deadline {
            let name = "during\(acked.count)-\(Int.random(in: 0..<1_000_000))"
            if await cluster.create(new, name, value: "b").acked { acked.append(name) }
        }
        #expect(acked.count == 10)
        // Woken up, the old leader finds its lease unsafe and refuses writes (503) until it learns who leads; then
        // it forwards them to the new leader.
        cluster.signal(old, SIGCONT)
        var writtenOnOld = false
        let again = Date().addingTimeInterval(30)
        while !writtenOnOld, Date() < again {
            let (ok, response) = await cluster.create(old, "after", value: "c")
            writtenOnOld = ok
            if !ok {
                #expect(response?.status == 503, "a refused write on the deposed leader: \(response?.status ?? 0)")
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(writtenOnOld, "a write on the deposed leader is forwarded to the new one once it knows")
        try await cluster.waitConverged()
        await cluster.stopAll()
        for node in cluster.names {
            let names = try await cluster.recordNames(node)
            #expect(names.isSuperset(of: (0..<10).map { "before\($0)" } + acked + ["after"]), "\(node)")
        }
        let hashes = try await cluster.names.asyncMap { try await cluster.contentHash($0) }
        #expect(Set(hashes).count == 1)
    }

    /// 16 writers under `--ack quorum` while the leader is SIGKILLed again and again (20 times by default;
    /// `CLOUDLET_CLUSTER_KILLS` for more): no acknowledged write is lost, no record appears that no client sent,
    /// and the replicas end with the same content.
    @Test func killingTheLeaderRepeatedlyLosesNoAcknowledgedWrite() async throws {
        let kills = Int(ProcessInfo.processInfo.environment["CLOUDLET_CLUSTER_KILLS"] ?? "") ?? 20
        let cluster = try await ClusterHarness()
        try await cluster.startAll()
        defer { withExtendedLifetime(cluster) {} }

        let outcomes = Outcomes()
        let running = outcomes.running
        let writers = (0..<16).map { w in
            Task {
                var n = 0
                var target = w % cluster.names.count
                while running.isSet {
                    let name = "w\(w)-\(n)"
                    n += 1
                    let node = cluster.names[target]
                    let (acked, _) = await cluster.create(node, name, value: "\(w).\(n)")
                    outcomes.record(name, acked: acked)
                    if !acked {
                        target = (target + 1) % cluster.names.count
                        try? await Task.sleep(for: .milliseconds(50))
                    }
                }
            }
        }

        var killed = 0
        var killedAt: [ContinuousClock.Instant] = []
        for _ in 0..<kills {
            let leader = try await cluster.leader()
            let before = outcomes.snapshot.acked.count
            killedAt.append(.now)
            await cluster.kill(leader)
            killed += 1
            _ = try await cluster.leader(not: leader)
            try await cluster.start(leader)
            // Writes go through again before the next kill.
            let deadline = Date().addingTimeInterval(30)
            while outcomes.snapshot.acked.count <= before + 16, Date() < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(outcomes.snapshot.acked.count > before, "no write acknowledged after kill \(killed)")
        }
        running.clear()
        for w in writers { await w.value }
        try await cluster.waitConverged()
        await cluster.stopAll()

        let final = outcomes.snapshot
        // Failover time: from the kill to the first write acknowledged after it.
        let gaps = killedAt.compactMap { k in final.ackTimes.first { $0 > k }.map { Double(($0 - k) / .milliseconds(1)) } }.sorted()
        func percentile(_ p: Double) -> Int { gaps.isEmpty ? -1 : Int(gaps[min(gaps.count - 1, Int(Double(gaps.count) * p))]) }
        print(
            "cluster failover: \(killed) leader kills, \(final.acked.count) writes acknowledged, \(final.unknown.count) not, "
                + "\(cluster.truncationLines.count) divergent suffixes truncated; writes acknowledged again after a kill "
                + "in p50 \(percentile(0.5)) ms, p99 \(percentile(0.99)) ms (lease TTL \(cluster.leaseTTL) s)")
        #expect(final.acked.count > 0)
        var hashes: [String] = []
        for node in cluster.names {
            let names = try await cluster.recordNames(node)
            let lost = final.acked.subtracting(names)
            #expect(lost.isEmpty, "\(node) lost \(lost.count) acknowledged writes, e.g. \(lost.sorted().prefix(5))")
            let phantom = names.subtracting(final.acked).subtracting(final.unknown)
            #expect(phantom.isEmpty, "\(node) holds records no client sent: \(phantom.sorted().prefix(5))")
            hashes.append(try await cluster.contentHash(node))
        }
        #expect(Set(hashes).count == 1, "replicas differ after heal: \(hashes)")
    }
}

/// What the writers of a failover test were told: acknowledged names, and names whose outcome is unknown.
final class Outcomes: Sendable {
    struct Sets {
        var acked: Set<String> = []
        var unknown: Set<String> = []
        /// When each acknowledgement arrived, in order.
        var ackTimes: [ContinuousClock.Instant] = []
    }
    private let sets = Mutex(Sets())
    let running = Flag()

    func record(_ name: String, acked: Bool) {
        _ = sets.withLock { s in
            if acked {
                s.acked.insert(name)
                s.ackTimes.append(.now)
            } else {
                s.unknown.insert(name)
            }
        }
    }

    var snapshot: Sets { sets.withLock { $0 } }
}

/// A Bool shared between tasks.
final class Flag: Sendable {
    private let value = Atomic<Bool>(true)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func clear() { value.store(false, ordering: .relaxed) }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for e in self { out.append(try await transform(e)) }
        return out
    }
}
