import CloudletTestSupport
import Foundation
import Testing

/// A follower that was down catches up by tailing and says how it goes (`CatchUpProgress`): a line when it finds
/// itself far behind the leader's published end, and one when it is within reach again (docs/replication.md,
/// "Catch-up, failover and lag").
@Suite(.serialized, .enabled(if: EtcdProcess.isInstalled, "etcd-server is not installed (.ci/install-deps)"))
struct ClusterCatchUpTests {
    @Test func aFollowerThatWasDownSaysItIsCatchingUpAndWhenItCaughtUp() async throws {
        let cluster = try await ClusterHarness()
        defer { withExtendedLifetime(cluster) {} }
        try await cluster.startAll()
        let leader = try await cluster.leader()
        let down = try #require(cluster.names.first { $0 != leader })
        await cluster.kill(down)
        // 2,400 commits of one record while it is down: more than twice the 1,000-LSN threshold, so still far
        // behind after the first batch it appends.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<8 {
                group.addTask {
                    for i in 0..<300 { _ = try await cluster.createRetrying(leader, "w\(w)-\(i)") }
                }
            }
            try await group.waitForAll()
        }
        try await cluster.start(down)
        try await cluster.waitConverged()
        let lines = cluster.stderr(down)
        let catching = lines.filter { $0.contains("catching up from \(leader): LSN ") }
        let caught = lines.filter { $0.contains("caught up with \(leader) at LSN ") && $0.contains(" LSNs/s)") }
        #expect(!catching.isEmpty && !caught.isEmpty, "\(lines.suffix(20))")
        // The leader, never behind, says neither.
        #expect(!cluster.stderr(leader).contains { $0.contains("catching up from") || $0.contains("caught up with") })
        await cluster.stopAll()
        await cluster.etcd.stop()
    }
}
