import CloudletConcurrency
import CloudletCore
import CloudletTestSupport
import Testing

@testable import Cloudlet

/// A follower's change listeners (the notification hub, the console's change view) hear the frames it follows,
/// once they are durable there, as a leader's hear its own commits (Partition+Replication.swift).
@Suite struct FollowerChangeTests {
    @Test func aFollowersListenersHearTheFramesItFollows() async throws {
        let leaderDir = TempDir("follower-changes-leader"), followerDir = TempDir("follower-changes-follower")
        let leader = try await openStore(leaderDir)
        let follower = try await openStore(followerDir)
        let db = try leader.container(testContainer).privateDatabase(user: "u")
        _ = try await db.modify([.create(note("n1")), .create(note("n2"))])
        var changes = follower.committedChanges().makeAsyncIterator()
        let (from, to) = (leader.partitions[0], follower.partitions[0])
        try await ThreadBridge.offload {
            let batch = try from.log.frames(from: 1, maxBytes: 1 << 20)
            let last = try to.appendFollowed(batch.bytes, leaderEpoch: from.log.highestEpoch)
            try to.waitFollowedDurable(last)
        }
        // Closing ends the stream after what it was handed: nothing to wait for, whether or not the frames came.
        try await follower.close()
        var saved: [String] = []
        while let change = try await changes.next() {
            for case .recordSaved(_, let r) in change.events { saved.append(r.id.recordName) }
        }
        #expect(saved == ["n1", "n2"])
        try await leader.close()
    }
}
