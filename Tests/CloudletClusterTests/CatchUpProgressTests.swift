import Testing

@testable import CloudletCluster

@Suite struct CatchUpProgressTests {
    @Test("a replica far behind says so, then at most every interval how far it is, then once that it caught up and how fast")
    func linesOfACatchUp() {
        var p = CatchUpProgress()
        func note(_ durable: UInt64, _ leaderEnd: UInt64, at now: UInt64) -> String? {
            p.note(log: "partition 0", durable: durable, leaderEnd: leaderEnd, leader: "n1", now: now)
        }
        // Within the threshold: nothing to say.
        #expect(note(100, 1_100, at: 1_000) == nil)
        // Far behind: one line at once.
        #expect(note(200, 1_000_200, at: 2_000) == "partition 0: catching up from n1: LSN 200 of 1000200, 1000000 behind")
        // Nothing more until the interval has passed.
        #expect(note(300_200, 1_000_200, at: 6_999) == nil)
        // 5 s after the first line: where it is, and its rate since that line (500,000 LSNs in 5 s).
        #expect(note(500_200, 1_000_200, at: 7_000) == "partition 0: catching up from n1: LSN 500200 of 1000200 (50 %), 100000 LSNs/s")
        #expect(note(600_000, 1_000_200, at: 8_000) == nil)
        // Within the threshold of the leader's end: caught up, with the time and rate since it started.
        #expect(note(999_200, 1_000_200, at: 12_000) == "partition 0: caught up with n1 at LSN 999200 in 10.0 s (99900 LSNs/s)")
        // And quiet again while it keeps up.
        #expect(note(1_000_000, 1_001_000, at: 20_000) == nil)
        // A clock that steps back says nothing wrong (no negative time).
        #expect(note(1_000_000, 3_000_000, at: 30_000)?.hasPrefix("partition 0: catching up from n1: LSN 1000000 of 3000000") == true)
        #expect(note(1_000_500, 3_000_000, at: 29_000) == nil)
    }
}
