import CloudletCore
import CloudletTestSupport
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

    @Test func aSmallCommitsRecordsAreCachedAsWrittenABulkCommitsAreNot() async throws {
        let dir = TempDir("record-cache")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let small = (0..<Partition.cachedCommitLimit).map { note("s\($0)") }
        let bulk = (0...Partition.cachedCommitLimit).map { note("b\($0)") }
        for batch in [small, bulk] { #expect(try await db.modify(batch.map { .create($0) }).allSatisfy { $0.error == nil }) }
        let before = store.statistics
        _ = try await db.record(for: small[3].id)
        let afterSmall = store.statistics
        #expect(afterSmall.cacheHits == before.cacheHits + 1, "a record of a commit of \(small.count) was cached as written")
        _ = try await db.record(for: bulk[3].id)
        let afterBulk = store.statistics
        #expect(afterBulk.cacheHits == afterSmall.cacheHits, "a record of a commit of \(bulk.count) was not")
        #expect(afterBulk.cacheMisses == afterSmall.cacheMisses + 1)
        try await store.close()
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

    /// Reads each of `keys` as the partition does: a lookup, and on a miss the version read from disk offered to the
    /// cache. Returns the hits.
    func read(_ cache: RecordCache, _ keys: some Sequence<Int>) -> Int {
        var hits = 0
        for i in keys {
            let key = RecordCache.Key(lsn: UInt64(i), index: 0)
            if cache.get(key) != nil { hits += 1 } else { cache.putRead(key, record: record(i)) }
        }
        return hits
    }

    @Test func readsCyclingOverMoreVersionsThanTheCacheHoldsKeepWhatItHasAndHitItsShare() {
        // A query's pages run again and again over 300 versions with room for 100 (within the doorkeeper's window of
        // 400): least-recently-used alone admits each on its second read and evicts one for it, so a round finds
        // none of what the last one left; admission by frequency keeps the 100 it has (read as often as any newcomer),
        // which a round then hits.
        let cache = RecordCache(capacity: 100)
        for _ in 0..<4 { _ = read(cache, 0..<300) }
        let hits = read(cache, 0..<300)
        #expect(hits >= 90, "\(hits) hits in a round of 300 reads with 100 cached")
    }

    @Test func aVersionReadMoreOftenThanTheOneItWouldEvictGetsIn() {
        let cache = RecordCache(capacity: 100)
        for _ in 0..<2 { _ = read(cache, 0..<100) }  // full: each read twice
        let hot = 5000
        var reads = 0
        while cache.get(RecordCache.Key(lsn: UInt64(hot), index: 0)) == nil && reads < 10 {
            cache.putRead(RecordCache.Key(lsn: UInt64(hot), index: 0), record: record(hot))
            reads += 1
        }
        #expect(reads <= 3, "a version read \(reads) times is still not cached")
        // Read twice, as often as those held: no better than the victim, it stays out (a third read would let it in).
        _ = read(cache, [7000, 7000])
        #expect(!cache.contains(RecordCache.Key(lsn: 7000, index: 0)))
    }

    @Test func theFrequencySketchNeverCountsAKeyLowAndForgetsByHalves() {
        var sketch = FrequencySketch(capacity: 1000)
        var random = SplitMix64(seed: 11)
        let keys = (0..<1000).map { _ in random.next() }
        var truth: [UInt64: Int] = [:]
        for (n, k) in keys.enumerated() {
            for _ in 0..<(n % 8) { sketch.increment(k) }  // 3,500 counts: under the 10,000 that halve
            truth[k] = n % 8
        }
        #expect(keys.allSatisfy { sketch.frequency($0) >= truth[$0]! }, "a count-min sketch never counts low")
        let exact = keys.filter { sketch.frequency($0) == truth[$0]! }.count
        #expect(exact > 900, "only \(exact) of 1,000 keys counted exactly with 16 counters a key")
        // 6,500 counts of other keys reach the sample of 10,000: every counter halves.
        for _ in 0..<6500 { sketch.increment(random.next()) }
        let halved = keys.filter { truth[$0]! >= 2 }.filter { sketch.frequency($0) <= (truth[$0]! + 1) / 2 + 1 }.count
        #expect(halved > 600, "\(halved) of ~750 counted keys halved")
    }
}
