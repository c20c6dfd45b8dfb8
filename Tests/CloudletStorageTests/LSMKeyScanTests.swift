import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Testing

@Suite("LSM key scan")
struct LSMKeyScanTests {
    private func configuration() -> LSMTreeConfiguration {
        var c = LSMTreeConfiguration()
        c.run.blockSize = 256
        c.targetRunSize = 4 << 10
        c.level1Size = 12 << 10
        c.levelSizeMultiplier = 3
        c.mergeBytesPerSecond = nil
        c.backgroundMerges = false
        c.blockCacheCapacity = 64 << 10
        return c
    }

    /// Which write of a key a view must show: the highest sequence, then the newest source (a larger rank).
    private struct Newest {
        var entry: LSMEntry
        var rank: Int
    }

    /// `key` with `n` constant bytes after its first (none if it is empty), an order-preserving change: keys whose
    /// first bytes (the scan's 8-byte head and its tail words, in a range whose bounds differ at once) tie and whose
    /// order lies in what follows, as an index's numbers (escaped zeros) make them. 7 reaches the tail words, 31 the
    /// bytes after them.
    private static func padded(_ n: Int) -> ([UInt8]) -> [UInt8] {
        let filler = (0..<n).map { [0x00, 0xFF, 0x80][$0 % 3] as UInt8 }
        return { key in key.isEmpty ? key : [key[0]] + filler + key[1...] }
    }

    /// A tree with `flushes` level-0 runs (and deeper levels when `merge`), two memtables laid over its view that
    /// sometimes hold the same key at the same sequence, and a dictionary model of what the view holds. `shape`
    /// turns each random key into the one written (order-preserving).
    private func fixture(
        _ rng: inout SeededRandom, flushes: Int, merge: Bool, tableWrites: Int, shape: ([UInt8]) -> [UInt8] = { $0 }
    ) throws -> (LSMTree, LSMReadView, [[UInt8]: LSMEntry]) {
        let tree = try LSMTree(directory: "/tree", fileSystem: InMemoryFileSystem(), configuration: configuration())
        var newest: [[UInt8]: Newest] = [:]
        var sequence: UInt64 = 0
        func write(_ key: [UInt8], rank: Int, _ rng: inout SeededRandom) -> LSMEntry {
            let e: LSMEntry = rng.chance(30) ? .delete(key, sequence: sequence) : .put(key, randomValue(&rng), sequence: sequence)
            if let n = newest[key], (n.entry.sequence, n.rank) > (e.sequence, rank) { return e }
            newest[key] = Newest(entry: e, rank: rank)
            return e
        }
        for round in 0..<flushes {
            for _ in 0..<300 {
                sequence += 1
                try tree.apply(write(shape(randomKey(&rng, maxLength: 4)), rank: 0, &rng))
            }
            var w = ByteWriter()
            w.u64(sequence)
            try tree.flush(logPosition: w.bytes)
            if merge && round == flushes / 2 { try tree.mergeUntilIdle() }
        }
        var older = Memtable()
        var newer = Memtable()
        for _ in 0..<tableWrites {
            sequence += 1
            let key = shape(rng.chance(70) ? randomBytes(1 + rng.int(8), &rng) : randomKey(&rng, maxLength: 4))
            if rng.chance(50) { older.apply(write(key, rank: 1, &rng)) }
            if rng.chance(50) { newer.apply(write(key, rank: 2, &rng)) }
        }
        let view = LSMReadView(memtables: [newer, older], over: tree.readView())
        return (tree, view, newest.compactMapValues { $0.entry.isTombstone ? nil : $0.entry })
    }

    private func randomRange(_ rng: inout SeededRandom, shape: ([UInt8]) -> [UInt8] = { $0 }) -> LSMKeyRange {
        let bounds = [shape(randomKey(&rng, maxLength: 3)), shape(randomKey(&rng, maxLength: 3))].sorted(by: LSMKey.less)
        return LSMKeyRange(lower: rng.chance(15) ? nil : bounds[0], upper: rng.chance(15) ? nil : bounds[1])
    }

    @Test(
        "a scan of a range yields exactly the model's live keys and entries, newest first among equal keys, with any number of sources",
        arguments: [(1, false, 0, 0), (3, false, 3000, 0), (7, false, 6000, 0), (6, true, 9000, 0), (6, true, 9000, 7), (6, true, 9000, 31)])
    func scanAgreesWithModel(flushes: Int, merge: Bool, tableWrites: Int, padding: Int) throws {
        let seed = SeededRandom.testSeed()
        var rng = SeededRandom(seed: seed)
        let shape = Self.padded(padding)
        let (tree, view, model) = try fixture(&rng, flushes: flushes, merge: merge, tableWrites: tableWrites, shape: shape)
        defer { tree.close() }
        for round in 0..<150 {
            let range = round == 0 ? LSMKeyRange.all : randomRange(&rng, shape: shape)
            let expected = model.values.filter { range.contains($0.key) }.sorted { LSMKey.less($0.key, $1.key) }
            let scan = try view.makeKeyScan(range)
            var got: [LSMEntry] = []
            while let e = try scan.entry() {
                #expect(scan.key == e.key)
                got.append(e)
                try scan.advance()
            }
            #expect(scan.done && scan.key == nil)
            #expect(got.map(\.key) == expected.map(\.key), "seed \(seed) \(range) keys")
            #expect(got == expected, "seed \(seed) \(range) entries")
            #expect(try view.count(range) == expected.count, "seed \(seed) \(range) count")
        }
    }

    @Test(
        "seeks interleaved with steps land on the first live key at least the target, never moving back",
        arguments: [0, 7, 31])
    func seeksAgreeWithModel(padding: Int) throws {
        let seed = SeededRandom.testSeed()
        var rng = SeededRandom(seed: seed)
        let shape = Self.padded(padding)
        let (tree, view, model) = try fixture(&rng, flushes: 5, merge: true, tableWrites: 6000, shape: shape)
        defer { tree.close() }
        for _ in 0..<150 {
            let range = randomRange(&rng, shape: shape)
            let expected = model.keys.filter { range.contains($0) }.sorted(by: LSMKey.less)
            let scan = try view.makeKeyScan(range)
            var at = 0  // the index in `expected` of the scan's key
            while at < expected.count {
                #expect(scan.key == expected[at], "seed \(seed) \(range) at \(at)")
                if rng.chance(60) {
                    try scan.advance()
                    at += 1
                } else {
                    // Sometimes behind the current key (a no-op), mostly ahead of it, at a key or between keys.
                    let target = rng.chance(50) ? expected[min(expected.count - 1, at + rng.int(40))] : shape(randomKey(&rng, maxLength: 4))
                    try scan.seek(target)
                    at = max(at, modelIndex(expected, target))
                }
            }
            #expect(scan.done, "seed \(seed) \(range): past the end")
        }
    }

    /// The index of the first of `sorted` at least `key`.
    private func modelIndex(_ sorted: [[UInt8]], _ key: [UInt8]) -> Int {
        sorted.firstIndex { LSMKey.compare($0, key) >= 0 } ?? sorted.count
    }
}
