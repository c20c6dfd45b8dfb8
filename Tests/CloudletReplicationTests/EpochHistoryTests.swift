import CloudletReplication
import Testing

@Suite("EpochHistory: the epoch of each LSN and where a follower's log can agree")
struct EpochHistoryTests {
    /// Epoch 1 at LSNs 1…4, epoch 3 at 5…9, epoch 4 from 10 (last LSN 12).
    private func sample() -> EpochHistory {
        var h = EpochHistory()
        for lsn in 1...12 as ClosedRange<UInt64> { h.record(epoch: lsn < 5 ? 1 : lsn < 10 ? 3 : 4, at: lsn) }
        return h
    }

    @Test("epoch(at:) gives each frame's epoch, 0 before the first")
    func epochAt() {
        let h = sample()
        #expect(h.epoch(at: 0) == 0)
        #expect([1, 4, 5, 9, 10, 12].map { h.epoch(at: $0) } == [1, 1, 3, 3, 4, 4])
    }

    @Test("end(ofEpochAtMost:) is Kafka's end offset for a leader epoch")
    func endOfEpoch() {
        let h = sample()
        #expect(h.end(ofEpochAtMost: 1, lastLSN: 12) == (1, 4))
        #expect(h.end(ofEpochAtMost: 2, lastLSN: 12) == (1, 4))
        #expect(h.end(ofEpochAtMost: 3, lastLSN: 12) == (3, 9))
        #expect(h.end(ofEpochAtMost: 9, lastLSN: 12) == (4, 12))
        #expect(h.end(ofEpochAtMost: 0, lastLSN: 12) == (0, 0))
    }

    @Test("truncate(after:) forgets the epochs of removed frames")
    func truncate() {
        var h = sample()
        h.truncate(after: 7)
        #expect(h.epoch(at: 7) == 3)
        #expect(h.end(ofEpochAtMost: 9, lastLSN: 7) == (3, 7))
        h.truncate(after: 4)
        #expect(h.end(ofEpochAtMost: 9, lastLSN: 4) == (1, 4))
    }
}
