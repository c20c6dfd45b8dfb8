import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

/// Compaction on a real cluster (three `cloudlet serve --cluster` processes with 4 KiB segments, a real etcd): nodes
/// compact in the background up to the compaction horizon, the offline tool compacts a stopped node, compacted
/// nodes restart and fail over, a follower down across compactions catches up, and a node that lost its store seeds
/// itself from the leader's files and follows.
@Suite(.serialized, .enabled(if: EtcdProcess.isInstalled, "etcd-server is not installed (.ci/install-deps)"))
struct ClusterCompactionTests {
    /// Creates `count` new `Item` records (recorded in `sent`/`acked`) and overwrites a few `Hot` ones many times, so
    /// that the sealed segments fill with dead versions; `writers` at a time, each through node `via()`.
    private func write(
        _ cluster: ClusterHarness, _ tag: String, count: Int, via: @escaping @Sendable () async -> String,
        sent: inout Set<String>, acked: inout Set<String>
    ) async {
        let padding = String(repeating: "x", count: 400)
        let results = await withTaskGroup(of: [(String, Bool)].self) { group in
            for w in 0..<4 {
                group.addTask {
                    var out: [(String, Bool)] = []
                    for i in stride(from: w, to: count, by: 4) {
                        let node = await via()
                        let name = "\(tag)-\(i)"
                        out.append((name, await cluster.create(node, name, value: padding).acked))
                        let hot = """
                            {"operations":[{"operationType":"forceReplace","record":{"recordName":"hot\(i % 5)","recordType":"Hot","fields":{"v":{"value":"\(tag) \(i) \(padding)"}}}}]}
                            """
                        for _ in 0..<2 { _ = try? await cluster.post(node, "records/modify", hot) }
                    }
                    return out
                }
            }
            var all: [(String, Bool)] = []
            for await part in group { all += part }
            return all
        }
        for (name, ok) in results {
            sent.insert(name)
            if ok { acked.insert(name) }
        }
    }

    private func marker(_ cluster: ClusterHarness, _ node: String) throws -> CompactionMarker? {
        try CompactionMarker.load(directory: cluster.store(node) + "/p0000")
    }

    @Test func compactedNodesRestartFailOverAndCatchUpAndAnEmptyStoreBehindTheHorizonIsSeeded() async throws {
        let cluster = try await ClusterHarness(extraArguments: ["--segment-size", "4096"])
        defer { withExtendedLifetime(cluster) {} }
        try await cluster.startAll()
        var sent: Set<String> = []
        var acked: Set<String> = []
        let leader = try await cluster.leader()
        try await Task.sleep(for: .seconds(1))
        await write(cluster, "a", count: 120, via: { leader }, sent: &sent, acked: &acked)
        try await cluster.waitConverged()
        #expect(acked.count == 120, "every write of a healthy cluster is acknowledged")
        // The horizon every replica holds is visible in the status (and /cloudlet/metrics).
        let horizonNow = await cluster.status(leader)?["partitions"]?.arrayValue?.first?["compactionHorizon"]?.int64Value ?? 0
        #expect(horizonNow > 0, "the leader's compaction horizon moved once every follower fetched")

        // A follower goes down. The leader restarts, so that a new epoch begins whose leader never heard from the
        // follower (the horizon must stay where the follower stopped); the two write on.
        let follower = cluster.names.first { $0 != leader }!
        await cluster.kill(follower)
        await cluster.kill(leader, SIGTERM)
        try await cluster.start(leader)
        let newLeader = try await cluster.leader()
        await write(cluster, "b", count: 80, via: { newLeader }, sent: &sent, acked: &acked)

        // The leader is stopped and compacted offline (bounded by the horizon it stored), then started again.
        await cluster.kill(newLeader, SIGTERM)
        let tool = try await ChildProcess.run(try builtExecutable("cloudlet-tool"), ["compact", "--data", cluster.store(newLeader), "--json"])
        #expect(tool.status == 0, "cloudlet-tool compact on a cluster node: \(tool.err)")
        let offline = try #require(try marker(cluster, newLeader), "the offline compaction of \(newLeader) took effect")
        #expect(offline.epochs?.isEmpty == false, "the marker records the epochs of the prefix it covers")
        let horizon = try CompactionHorizon.load(directory: cluster.store(newLeader) + "/p0000")
        #expect(offline.coveredThrough <= horizon, "compaction stayed at or below the stored horizon \(horizon)")
        try await cluster.start(newLeader)
        // The follower that was down across both compactions comes back and catches up by tailing.
        try await cluster.start(follower)
        let second = try await cluster.leader()
        await write(cluster, "c", count: 60, via: { second }, sent: &sent, acked: &acked)
        try await cluster.waitConverged()

        // Fail over from a compacted leader, repeatedly, while writes go on and every node compacts in the background
        // (CLOUDLET_CLUSTER_COMPACTION_KILLS for a longer run).
        let kills = ProcessInfo.processInfo.environment["CLOUDLET_CLUSTER_COMPACTION_KILLS"].flatMap(Int.init) ?? 3
        for k in 0..<kills {
            let failed = try await cluster.leader()
            await cluster.kill(failed)
            let next = try await cluster.leader(not: failed)
            await write(cluster, "d\(k)", count: 20, via: { next }, sent: &sent, acked: &acked)
            try await cluster.start(failed)
            // With every replica up again the horizon moves, and the nodes compact in the background.
            await write(cluster, "u\(k)", count: 20, via: { next }, sent: &sent, acked: &acked)
        }
        try await cluster.waitConverged()
        await cluster.stopAll()
        for n in cluster.names {
            let m = try marker(cluster, n)
            let h = try CompactionHorizon.load(directory: cluster.store(n) + "/p0000")
            #expect((m?.coveredThrough ?? 0) <= h, "\(n)'s compaction went past its stored horizon")
            print("\(n): compaction generation \(m?.generation ?? 0) covers LSNs 1…\(m?.coveredThrough ?? 0) (\(m?.epochs?.count ?? 0) epochs), stored horizon \(h)")
        }
        print("\(kills) leader kills: \(acked.count) of \(sent.count) writes acknowledged")

        var hashes: Set<String> = []
        for n in cluster.names {
            let names = try await cluster.recordNames(n)
            #expect(acked.subtracting(names).isEmpty, "\(n) lost acknowledged writes: \(acked.subtracting(names).sorted().prefix(5))")
            #expect(names.subtracting(sent).isEmpty, "\(n) holds records no client sent")
            hashes.insert(try await cluster.contentHash(n))
            let m = try #require(try marker(cluster, n), "\(n)'s log was compacted (in the background or offline)")
            #expect(m.epochs != nil)
        }
        #expect(hashes.count == 1, "replicas' content differs: \(hashes)")

        // A node whose store is lost starts empty: the others compacted what it lacks, so it seeds itself from the
        // leader's files (its compacted segments and marker included), then tails it like any follower.
        let lost = cluster.names.first { $0 != follower }!
        try FileManager.default.removeItem(atPath: cluster.store(lost))
        for n in cluster.names where n != lost { try await cluster.start(n) }
        let source = try await cluster.leader()
        try await cluster.start(lost)
        await write(cluster, "e", count: 20, via: { source }, sent: &sent, acked: &acked)
        try await cluster.waitConverged()
        let seededLines = cluster.stderr(lost)
        #expect(seededLines.contains { $0.contains("seeded from \(source)") }, "\(seededLines.suffix(8))")
        #expect(!seededLines.contains { $0.contains("halting") }, "\(seededLines.suffix(8))")
        // The leader's index went with the logs (its runs as of one version), and the copy opened with it rather than
        // setting it aside and replaying the whole log.
        #expect(cluster.stderr(source).contains { $0.contains("seeding \(lost): ") && $0.contains(", 1 indexes)") })
        #expect(!seededLines.contains { $0.contains("set aside the index") }, "\(seededLines.filter { $0.contains("index") })")
        await cluster.stopAll()
        let seededMarker = try #require(try marker(cluster, lost), "the seed copied the leader's compaction marker")
        #expect(seededMarker.epochs != nil)
        let names = try await cluster.recordNames(lost)
        #expect(acked.subtracting(names).isEmpty, "the seeded node lacks acknowledged writes: \(acked.subtracting(names).sorted().prefix(5))")
        #expect(names.subtracting(sent).isEmpty, "the seeded node holds records no client sent")
        var after: Set<String> = []
        for n in cluster.names { after.insert(try await cluster.contentHash(n)) }
        #expect(after.count == 1, "the seeded replica's content differs from the others': \(after)")

        // An empty node that starts while no node leads cannot seed at start (there is no source yet); once one
        // leads, it asks for LSN 1, is told the log was compacted, and restarts to seed itself instead of halting.
        let early = cluster.names.first { $0 != lost }!
        try FileManager.default.removeItem(atPath: cluster.store(early))
        try await cluster.start(early)
        let joined = Date().addingTimeInterval(30)
        while !cluster.stderr(early).contains(where: { $0.contains("node \(early), replicas") }) && Date() < joined {
            try await Task.sleep(for: .milliseconds(50))
        }
        for n in cluster.names where n != early { try await cluster.start(n) }
        let lead = try await cluster.leader()
        await write(cluster, "f", count: 20, via: { lead }, sent: &sent, acked: &acked)
        try await cluster.waitConverged()
        let earlyLines = cluster.stderr(early)
        #expect(earlyLines.contains { $0.contains("compacted what this empty store lacks; restarting to seed it") }, "\(earlyLines.suffix(8))")
        #expect(earlyLines.contains { $0.contains("seeded from ") } && !earlyLines.contains { $0.contains("halting") })
        await cluster.stopAll()
        #expect(acked.subtracting(try await cluster.recordNames(early)).isEmpty, "the node seeded after `compacted` lacks acknowledged writes")
        await cluster.etcd.stop()
    }
}
