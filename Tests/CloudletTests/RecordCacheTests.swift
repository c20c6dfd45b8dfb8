import CloudletCore
import Testing

@testable import Cloudlet

@Suite struct RecordCacheTests {
    func record(_ i: Int) -> Record { Record(recordType: "T", recordName: "r\(i)", fields: ["i": .int64(Int64(i))]) }

    @Test func aVersionReadOnceIsNotCachedAVersionReadTwiceIsAndAWrittenOneAtOnce() {
        let cache = RecordCache(capacity: 100)
        let key = RecordCache.Key(lsn: 7, index: 3)
        cache.putRead(key, record: record(1))
        #expect(cache.get(key) == nil, "a one-off read is not admitted")
        cache.putRead(key, record: record(1))
        #expect(cache.get(key)?.recordName == "r1", "read again: admitted")
        let written = RecordCache.Key(lsn: 8, index: 0)
        cache.put(written, record: record(2))
        #expect(cache.get(written)?.recordName == "r2")
    }

    @Test func aScanOfVersionsReadOnceInsertsAlmostNothing() {
        // Room for all of them: whatever is left out was kept out by the doorkeeper, not evicted.
        let cache = RecordCache(capacity: 100_000)
        for i in 0..<10_000 { cache.putRead(RecordCache.Key(lsn: UInt64(i), index: 0), record: record(i)) }
        let cached = (0..<10_000).filter { cache.contains(RecordCache.Key(lsn: UInt64($0), index: 0)) }.count
        // Only keys whose two doorkeeper bits other keys set first get in (a handful of 10,000 with 2^22 bits).
        #expect(cached < 500, "\(cached) of 10,000 one-off reads were cached")
        // Read a second time, they are all cached.
        for i in 0..<10_000 { cache.putRead(RecordCache.Key(lsn: UInt64(i), index: 0), record: record(i)) }
        #expect((0..<10_000).allSatisfy { cache.contains(RecordCache.Key(lsn: UInt64($0), index: 0)) })
    }

    @Test func theDoorkeeperForgetsAfterItsWindowAndRarelyMistakesANewKeyForASeenOne() {
        var doorkeeper = Doorkeeper(capacity: 1000)  // a window of 4,000 keys
        var random = SplitMix64(seed: 3)
        let keys = (0..<3000).map { _ in random.next() }
        let falsePositives = keys.filter { doorkeeper.admits($0) }.count
        #expect(falsePositives < 150, "\(falsePositives) of 3,000 new keys passed for seen ones")
        #expect(keys.allSatisfy { doorkeeper.admits($0) }, "each seen once in this window: admitted")
        // About 1,000 more new keys fill the window, the next one clears it: after 2,000 the old keys are new again.
        for _ in 0..<2000 { _ = doorkeeper.admits(random.next()) }
        let readmitted = keys.filter { doorkeeper.admits($0) }.count
        #expect(readmitted < 150, "\(readmitted) of 3,000 keys from before the window passed for seen ones")
    }
}
