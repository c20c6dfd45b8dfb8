import CloudletClient
import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

/// `cloudlet cluster remove` and `add` on real nodes and a real etcd: what each refuses, and what a change does — a
/// removed replica no longer holds the compaction horizon back nor counts towards the majority, and may not rejoin
/// with its old store; an added one seeds itself, tails, holds every acknowledged write and counts towards the
/// majority.
@Suite(.serialized, .enabled(if: EtcdProcess.isInstalled, "etcd-server is not installed (.ci/install-deps)"))
struct ClusterMembershipTests {
    @Test func removingADeadReplicaTakesItOutOfTheMajorityAndTheCompactionHorizon() async throws {
        let cluster = try await ClusterHarness()
        try await cluster.startAll()
        defer { withExtendedLifetime(cluster) {} }
        let etcd = cluster.etcd.url.replacingOccurrences(of: "http://", with: "etcd://")
        func remove(_ node: String, json: Bool = false) async throws -> (status: Int32, out: [String], err: [String]) {
            try await ChildProcess.run(
                try cloudletExecutable(), ["cluster", "remove", node, "--etcd", etcd] + (json ? ["--json"] : []))
        }
        /// `remove` once etcd no longer lists `node` as live (its lease lapsed) and the previous change settled.
        func removeOnceGone(_ node: String) async throws -> (status: Int32, out: [String], err: [String]) {
            let deadline = Date().addingTimeInterval(30)
            while true {
                let r = try await remove(node, json: true)
                let text = r.err.joined()
                guard r.status != 0, text.contains("is live") || text.contains("retry"), Date() < deadline else { return r }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        var written: [String] = []
        func write(_ name: String, via node: String) async throws {
            if try await cluster.createRetrying(node, name) { written.append(name) }
        }
        /// Waits until etcd (as `leader` last polled it) no longer lists `gone` as live: their leases lapsed.
        func waitUntilDown(_ gone: [String], seen leader: String) async throws {
            let deadline = Date().addingTimeInterval(30)
            while true {
                let listed = (await cluster.status(leader)?["nodes"]?.arrayValue ?? []).compactMap { $0["node"]?.stringValue }
                if !listed.isEmpty && Set(listed).isDisjoint(with: gone) { return }
                guard Date() < deadline else { throw ChildProcess.Failure(message: "\(gone) still listed live: \(listed)") }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        func horizon(_ node: String) async -> Int64 {
            await cluster.status(node)?["partitions"]?.arrayValue?.first?["compactionHorizon"]?.int64Value ?? -1
        }

        let leader = try await cluster.leader()
        let others = cluster.names.filter { $0 != leader }
        let (dead, other) = (others[0], others[1])
        for i in 0..<5 { try await write("first-\(i)", via: leader) }
        try await cluster.waitConverged()

        // Refused: a live node, a stranger.
        let live = try await remove(leader)
        #expect(live.status != 0)
        #expect(live.err.joined().contains("\(leader) is live"), "\(live.err)")
        let stranger = try await remove("n9")
        #expect(stranger.status != 0)
        #expect(stranger.err.joined().contains("n9 is not a replica"), "\(stranger.err)")

        // Two of three down: taking one out would leave one live replica of two — no majority: refused.
        await cluster.kill(dead)
        await cluster.kill(other)
        try await waitUntilDown([dead, other], seen: leader)
        let noMajority = try await remove(dead)
        #expect(noMajority.status != 0)
        #expect(noMajority.err.joined().contains("would leave 1 live replica of 2"), "\(noMajority.err)")
        try await cluster.start(other)
        for i in 0..<5 { try await write("second-\(i)", via: leader) }
        // With `dead` down, the horizon stays where it stopped (it might need those frames when it returns).
        let held = await horizon(leader)

        let removed = try await removeOnceGone(dead)
        #expect(removed.status == 0, "\(removed.err)")
        let answer = try JSONParser.parse(Array((removed.out.last ?? "").utf8))
        #expect(answer["removed"]?.stringValue == dead)
        #expect(answer["replicas"]?.arrayValue?.compactMap(\.stringValue) == [leader, other].sorted())
        // Writes go on; the horizon moves past where the removed replica stopped.
        for i in 0..<10 { try await write("third-\(i)", via: leader) }
        let deadline = Date().addingTimeInterval(20)
        while await horizon(leader) <= held, Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        #expect(await horizon(leader) > held, "the compaction horizon stayed at \(held)")

        // The removed node may not come back as it was.
        let rejoin = try await cluster.startUntilExit(dead, timeout: 30)
        #expect(rejoin.status != 0)
        #expect(rejoin.stderr.joined().contains("\(dead) is not a replica"), "\(rejoin.stderr.suffix(5))")

        // Down to one replica: it alone is the majority of its set and acknowledges writes.
        await cluster.kill(other)
        let second = try await removeOnceGone(other)
        #expect(second.status == 0, "\(second.err)")
        for i in 0..<5 { try await write("alone-\(i)", via: leader) }
        // The last replica stays.
        let last = try await remove(leader)
        #expect(last.status != 0)
        #expect(last.err.joined().contains("\(leader) is the last replica"), "\(last.err)")

        await cluster.stopAll()
        let names = try await cluster.recordNames(leader)
        #expect(Set(written).isSubset(of: names), "\(leader) lacks \(Set(written).subtracting(names).sorted())")
        await cluster.etcd.stop()
    }

    @Test func anEmptyNodeWaitsToBeAddedThenSeedsItselfTailsAndCountsTowardsTheMajority() async throws {
        let cluster = try await ClusterHarness(nodes: 4)
        let (old, new) = (["n1", "n2", "n3"], "n4")
        try await cluster.startAll(only: old)
        defer { withExtendedLifetime(cluster) {} }
        let etcd = cluster.etcd.url.replacingOccurrences(of: "http://", with: "etcd://")
        func add(_ node: String) async throws -> (status: Int32, out: [String], err: [String]) {
            try await ChildProcess.run(try cloudletExecutable(), ["cluster", "add", node, "--etcd", etcd, "--json"])
        }
        var written: [String] = []
        func write(_ name: String, via node: String) async throws {
            if try await cluster.createRetrying(node, name) { written.append(name) }
        }
        let leader = try await cluster.leader()
        for i in 0..<20 { try await write("before-\(i)", via: leader) }
        try await cluster.waitConverged(among: old)

        // Refused: a node that has not started (not live), a replica.
        let notLive = try await add(new)
        #expect(notLive.status != 0)
        #expect(notLive.err.joined().contains("\(new) is not live"), "\(notLive.err)")
        let already = try await add(leader)
        #expect(already.status != 0)
        #expect(already.err.joined().contains("\(leader) is already a replica"), "\(already.err)")

        // Started empty outside the set, it registers and waits; writes go on without it.
        try await cluster.start(new)
        let waiting = Date().addingTimeInterval(30)
        while !cluster.stderr(new).joined().contains("waiting to be added"), Date() < waiting {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(cluster.stderr(new).joined().contains("waiting to be added"), "\(cluster.stderr(new).suffix(5))")
        // SIGTERM while it waits stops it cleanly; started again, it waits again.
        let stopped = await cluster.kill(new, SIGTERM)
        #expect(stopped.joined().contains("stopped while joining the cluster"), "\(stopped.suffix(5))")
        try await cluster.start(new)
        for i in 0..<10 { try await write("waiting-\(i)", via: leader) }

        let added = try await add(new)
        #expect(added.status == 0, "\(added.err)")
        let answer = try JSONParser.parse(Array((added.out.last ?? "").utf8))
        #expect(answer["added"]?.stringValue == new)
        #expect(answer["replicas"]?.arrayValue?.compactMap(\.stringValue) == old + [new])
        for i in 0..<10 { try await write("added-\(i)", via: leader) }
        try await cluster.waitConverged(timeout: 90)
        #expect(cluster.stderr(new).joined().contains("seed"), "n4 did not seed itself: \(cluster.stderr(new).suffix(8))")

        // One old follower down: the leader and the other old follower are 2 of 4, not a majority; only with the new
        // node counted (3 of 4) are writes acknowledged.
        let followers = old.filter { $0 != leader }
        await cluster.kill(followers[0])
        for i in 0..<10 { try await write("one-down-\(i)", via: leader) }
        #expect(written.filter { $0.hasPrefix("one-down-") }.count == 10, "writes with the new node as the third of four were not acknowledged")

        await cluster.stopAll()
        for node in [leader, new] {
            let names = try await cluster.recordNames(node)
            #expect(Set(written).isSubset(of: names), "\(node) lacks \(Set(written).subtracting(names).sorted())")
        }
        #expect(try await cluster.contentHash(new) == cluster.contentHash(leader), "the added replica's content differs")
        await cluster.etcd.stop()
    }
}
