import CloudletCluster
import CloudletReplication
import CloudletServer
import Testing

/// The rules `cloudlet cluster drain|promote` steer elections by (``LeadershipPreferences/allows``), and the sealing
/// of messages between nodes.
struct LeadershipPreferencesTests {
    let n1 = NodeID("n1"), n2 = NodeID("n2"), n3 = NodeID("n3")
    var live: [NodeID: UInt64] { [n1: 100, n2: 100, n3: 100] }

    @Test func withoutPreferencesEveryNodeMayLead() {
        let p = LeadershipPreferences()
        for n in [n1, n2, n3] {
            #expect(p.allows(n, leading: false, ownDurable: 100, live: live, leaderlessFor: 0, grace: 10_000))
            #expect(p.allows(n, leading: true, ownDurable: 100, live: live, leaderlessFor: 0, grace: 10_000))
        }
    }

    @Test func aDrainedNodeNeitherLeadsNorCampaignsWhileAnUndrainedReplicaIsLive() {
        let p = LeadershipPreferences(drained: [n1])
        #expect(!p.allows(n1, leading: true, ownDurable: 100, live: live, leaderlessFor: 0, grace: 10_000))
        #expect(!p.allows(n1, leading: false, ownDurable: 100, live: live, leaderlessFor: 500, grace: 10_000))
        #expect(p.allows(n2, leading: false, ownDurable: 100, live: live, leaderlessFor: 500, grace: 10_000))
        // The only live replica, or the only undrained one gone: it leads rather than leave the partition without.
        #expect(p.allows(n1, leading: true, ownDurable: 100, live: [n1: 100], leaderlessFor: 0, grace: 10_000))
        let all = LeadershipPreferences(drained: [n1, n2, n3])
        #expect(all.allows(n1, leading: true, ownDurable: 100, live: live, leaderlessFor: 0, grace: 10_000))
    }

    @Test func othersWaitForALivePreferredNodeAndTheLeaderHandsOverOnceItCaughtUp() {
        let p = LeadershipPreferences(preferred: n3)
        #expect(p.allows(n3, leading: false, ownDurable: 100, live: live, leaderlessFor: 500, grace: 10_000))
        #expect(!p.allows(n1, leading: false, ownDurable: 100, live: live, leaderlessFor: 500, grace: 10_000))
        // Leading: hand over only when the preferred node trails by at most handoverLag.
        let lag = LeadershipPreferences.handoverLag
        #expect(!p.allows(n1, leading: true, ownDurable: 100 + lag, live: live, leaderlessFor: 0, grace: 10_000))
        #expect(p.allows(n1, leading: true, ownDurable: 101 + lag, live: live, leaderlessFor: 0, grace: 10_000))
        // A preferred node that is down or drained is no reason to wait.
        #expect(p.allows(n1, leading: false, ownDurable: 100, live: [n1: 100, n2: 100], leaderlessFor: 0, grace: 10_000))
        let drainedToo = LeadershipPreferences(drained: [n3], preferred: n3)
        #expect(drainedToo.allows(n1, leading: true, ownDurable: 100, live: live, leaderlessFor: 0, grace: 10_000))
    }

    @Test func noPreferenceKeepsAPartitionLeaderlessPastTheGrace() {
        let p = LeadershipPreferences(drained: [n1], preferred: n3)
        #expect(!p.allows(n1, leading: false, ownDurable: 100, live: live, leaderlessFor: 10_000, grace: 10_000))
        #expect(p.allows(n1, leading: false, ownDurable: 100, live: live, leaderlessFor: 10_001, grace: 10_000))
        #expect(p.allows(n2, leading: false, ownDurable: 100, live: live, leaderlessFor: 10_001, grace: 10_000))
    }

    @Test func sealedMessagesOpenOnlyWithTheSameKeyAndUnchanged() {
        let key = Array(repeating: UInt8(7), count: 32)
        let a = MessageAuthenticator(key: key)
        let message: [UInt8] = Array("frames".utf8)
        let sealed = a.seal(message)
        #expect(sealed.count == message.count + MessageAuthenticator.tagLength)
        #expect(a.open(sealed).map(Array.init) == message)
        var tampered = sealed
        tampered[tampered.count - 1] ^= 1
        #expect(a.open(tampered) == nil)
        var forgedTag = sealed
        forgedTag[0] ^= 1
        #expect(a.open(forgedTag) == nil)
        #expect(MessageAuthenticator(key: Array(repeating: 8, count: 32)).open(sealed) == nil)
        #expect(a.open(message) == nil, "an unsealed message")
        #expect(a.open([]) == nil)
    }
}
