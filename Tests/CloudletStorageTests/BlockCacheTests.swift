import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Dispatch
import Testing

@Suite("Block cache")
struct BlockCacheTests {
    private func key(_ file: UInt64, _ offset: UInt64) -> BlockCache.Key { BlockCache.Key(fileNumber: file, offset: offset) }

    @Test("stays within its byte bound however much is inserted, from several threads")
    func bounded() {
        let capacity = 64 << 10
        let cache = BlockCache(capacity: capacity, shardCount: 4)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var rng = SeededRandom(seed: UInt64(thread))
            for i in 0..<2000 {
                cache.insert(key(UInt64(thread), UInt64(i)), [UInt8](repeating: 1, count: 100 + rng.int(4000)))
                if i % 3 == 0 { _ = cache.lookup(key(UInt64(thread), UInt64(rng.int(i + 1)))) }
            }
        }
        let stats = cache.statistics
        #expect(stats.usedBytes <= capacity)
        #expect(stats.usedBytes > capacity / 2)
        #expect(stats.insertions == 8000 && stats.evictions == stats.insertions - stats.entryCount)
        #expect(stats.hits + stats.misses == 4 * 667)
    }

    @Test("counts hits and misses and evicts the least recently used block")
    func lru() {
        let block = [UInt8](repeating: 7, count: 1000)
        let cache = BlockCache(capacity: 3 * (1000 + BlockCache.entryOverhead), shardCount: 1)
        cache.insert(key(1, 0), block)
        cache.insert(key(1, 1000), block)
        cache.insert(key(1, 2000), block)
        #expect(cache.lookup(key(1, 0)) == block)  // now the most recent
        #expect(cache.lookup(key(2, 0)) == nil)
        cache.insert(key(1, 3000), block)  // evicts (1, 1000), the least recently used
        #expect(cache.lookup(key(1, 1000)) == nil)
        #expect(cache.lookup(key(1, 0)) == block && cache.lookup(key(1, 2000)) == block)
        let stats = cache.statistics
        #expect(stats.hits == 3 && stats.misses == 2 && stats.evictions == 1 && stats.entryCount == 3)

        cache.insert(key(9, 0), [UInt8](repeating: 0, count: 10_000))  // larger than the cache: not kept
        #expect(cache.lookup(key(9, 0)) == nil)
        cache.removeAll(fileNumber: 1)
        #expect(cache.statistics.entryCount == 0 && cache.statistics.usedBytes == 0)
    }

    @Test("readers sharing a cache hit it on repeated reads of the same block")
    func readersHit() throws {
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/lsm")
        var rng = SeededRandom(seed: 11)
        let entries = randomEntries(500, &rng)
        let cache = BlockCache(capacity: 1 << 20)
        let path = try writeRun(entries, number: 4, directory: "/lsm", fileSystem: fs)
        let a = try SortedRunReader(path: path, fileNumber: 4, fileSystem: fs, cache: cache)
        let b = try SortedRunReader(path: path, fileNumber: 4, fileSystem: fs, cache: cache)
        let probe = entries[entries.count / 2]
        #expect(try a.get(probe.key) == probe)
        let afterFirst = cache.statistics
        #expect(afterFirst.misses == 1 && afterFirst.hits == 0)
        #expect(try b.get(probe.key) == probe)
        #expect(cache.statistics.hits == 1 && cache.statistics.misses == 1)
    }
}
