import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Testing

@Suite("Memtable")
struct MemtableTests {
    @Test("puts and deletes agree with a dictionary model: get, seek, scan; size and count follow", arguments: [5000, 60000])
    func model(writes: Int) throws {
        let seed = SeededRandom.testSeed()
        var rng = SeededRandom(seed: seed)
        var memtable = Memtable()
        var model: [[UInt8]: LSMEntry] = [:]
        for sequence in 1...UInt64(writes) {
            let key = randomKey(&rng, maxLength: writes > 10000 ? 8 : 6)
            let entry: LSMEntry = rng.chance(25) ? .delete(key, sequence: sequence) : .put(key, randomValue(&rng), sequence: sequence)
            memtable.apply(entry)
            model[key] = entry
        }
        let sorted = model.values.sorted { LSMKey.less($0.key, $1.key) }
        #expect(memtable.count == model.count, "seed \(seed)")
        #expect(memtable.maxSequence == UInt64(writes))
        if writes > 10000 {
            // Enough writes for sealed tables to have merged (tiered, four of a size class into one) at least once.
            #expect(memtable.layerSizes.contains { $0 > 2 * 2048 }, "\(memtable.layerSizes)")
            #expect(memtable.layerSizes.count < writes / 2048, "\(memtable.layerSizes)")
        }
        #expect(memtable.approximateBytes == sorted.reduce(0) { $0 + $1.key.count + $1.value.count + Memtable.entryOverhead })
        for entry in sorted { #expect(memtable.get(entry.key) == entry, "seed \(seed)") }
        #expect(memtable.get([0xFF, 0xFF, 0xFF]) == nil)
        let iterator = memtable.makeIterator()
        #expect(try iterator.entries() == sorted, "seed \(seed)")
        for _ in 0..<200 {
            let key = randomKey(&rng, maxLength: 7)
            iterator.seek(key)
            #expect(iterator.current == modelSeek(sorted, key).first, "seed \(seed)")
        }
    }

    @Test("keys sharing a long prefix, differing late, by zero bytes or only in length, come out in byte order")
    func sharedPrefixOrder() throws {
        let seed = SeededRandom.testSeed()
        var rng = SeededRandom(seed: seed)
        var memtable = Memtable()
        var model: [[UInt8]: LSMEntry] = [:]
        // A 41-byte prefix like a zone's path; suffixes of 0-24 bytes from {0, 1, 2}, so that many keys tie on the
        // 16 bytes after the prefix, some are prefixes of others, and zero bytes meet the zero padding.
        let prefix = [UInt8](repeating: 0x7A, count: 40) + [0x01]
        for sequence in 1...UInt64(20_000) {
            let key = prefix + (0..<rng.int(25)).map { _ in UInt8(rng.int(3)) }
            let entry = LSMEntry.put(key, [UInt8(sequence & 0xFF)], sequence: sequence)
            memtable.apply(entry)
            model[key] = entry
        }
        // Another zone's keys: a shorter shared prefix once they mix into one table.
        for sequence in 20_001...UInt64(20_500) {
            let key = [0x7A, 0x02] + (0..<rng.int(20)).map { _ in UInt8(rng.int(256)) }
            let entry = LSMEntry.put(key, [], sequence: sequence)
            memtable.apply(entry)
            model[key] = entry
        }
        #expect(!memtable.layerSizes.isEmpty, "the table was sealed into layers")
        let sorted = model.values.sorted { LSMKey.less($0.key, $1.key) }
        #expect(try memtable.makeIterator().entries() == sorted, "seed \(seed)")
        for entry in sorted.prefix(2000) { #expect(memtable.get(entry.key) == entry, "seed \(seed)") }
    }

    @Test("layers whose keys share prefixes of different lengths merge in byte order")
    func layersWithDifferentPrefixesMerge() throws {
        let seed = SeededRandom.testSeed()
        var rng = SeededRandom(seed: seed)
        var memtable = Memtable()
        var model: [[UInt8]: LSMEntry] = [:]
        // Table t's keys share a prefix of 1 + (t % 19) bytes, all ones after the first (16 and more too), so that
        // layers merge with a shorter common prefix than each has — their windows are moved by 0 to 18 bytes — and
        // the keys of different layers interleave. Tails are short and of bytes 0-2, so windows tie and zero bytes
        // meet the zero padding.
        var sequence: UInt64 = 0
        for t in 0..<40 {
            let prefix = [0x55] + [UInt8](repeating: 1, count: t % 19)
            for _ in 0..<2048 {
                sequence += 1
                let key = prefix + (0..<rng.int(6)).map { _ in UInt8(rng.int(3)) } + [UInt8(truncatingIfNeeded: sequence)]
                let entry = LSMEntry.put(key, [UInt8(sequence & 0xFF)], sequence: sequence)
                memtable.apply(entry)
                model[key] = entry
            }
        }
        #expect(memtable.layerSizes.contains { $0 > 2048 }, "sealed tables merged: \(memtable.layerSizes)")
        let sorted = model.values.sorted { LSMKey.less($0.key, $1.key) }
        #expect(try memtable.makeIterator().entries() == sorted, "seed \(seed)")
        for entry in sorted where entry.sequence % 7 == 0 { #expect(memtable.get(entry.key) == entry, "seed \(seed)") }
    }

    @Test("an older write of a key than the one held is ignored")
    func olderIgnored() {
        var memtable = Memtable()
        memtable.put([1], [9], sequence: 5)
        memtable.delete([1], sequence: 3)
        memtable.put([1], [8], sequence: 4)
        #expect(memtable.get([1]) == .put([1], [9], sequence: 5))
        #expect(memtable.count == 1)
    }

    @Test("a copy is a snapshot: writes to the original do not show in it or its iterators")
    func snapshot() throws {
        var memtable = Memtable()
        for i in 0..<100 { memtable.put([UInt8(i)], [1], sequence: UInt64(i + 1)) }
        let frozen = memtable
        let iterator = frozen.makeIterator()
        iterator.seekToFirst()
        for i in 0..<100 { memtable.put([UInt8(i)], [2], sequence: UInt64(200 + i)) }
        memtable.delete([5], sequence: 999)
        memtable.put([200], [3], sequence: 1000)
        var seen: [LSMEntry] = []
        while let e = iterator.current {
            seen.append(e)
            iterator.advance()
        }
        #expect(seen.count == 100 && seen.allSatisfy { $0.value == [1] })
        #expect(frozen.get([5])?.value == [1] && frozen.get([200]) == nil && frozen.count == 100)
        #expect(memtable.get([5])?.isTombstone == true && memtable.count == 101)
    }

    @Test("layers merged after a copy or an iterator was taken stay whole in that copy and iterator")
    func mergeKeepsWhatOthersHold() throws {
        func key(_ i: Int) -> [UInt8] { [0x4B, UInt8(i >> 8), UInt8(i & 0xFF)] }
        var memtable = Memtable()
        // Three sealed tables of one size class: the next seal merges four.
        for i in 0..<(3 * 2048) { memtable.put(key(i), [1], sequence: UInt64(i + 1)) }
        #expect(memtable.layerSizes == [2048, 2048, 2048])
        let frozen = memtable
        let iterator = memtable.makeIterator()
        let expected = (0..<(3 * 2048)).map { LSMEntry.put(key($0), [1], sequence: UInt64($0 + 1)) }.sorted { LSMKey.less($0.key, $1.key) }
        for i in (3 * 2048)..<(4 * 2048) { memtable.put(key(i), [2], sequence: UInt64(i + 1)) }
        #expect(memtable.layerSizes == [4 * 2048], "the four merged")
        #expect(try iterator.entries() == expected)
        #expect(try frozen.makeIterator().entries() == expected)
        #expect(frozen.get(key(7))?.value == [1] && frozen.get(key(3 * 2048)) == nil)

        // The copy gone, the next merge may take the entries of layers only the memtable holds.
        var alone = Memtable()
        for i in 0..<(4 * 2048) { alone.put(key(i), [3], sequence: UInt64(i + 1)) }
        let all = (0..<(4 * 2048)).map { LSMEntry.put(key($0), [3], sequence: UInt64($0 + 1)) }.sorted { LSMKey.less($0.key, $1.key) }
        #expect(alone.layerSizes == [4 * 2048])
        #expect(try alone.makeIterator().entries() == all)
        #expect(memtable.get(key(7))?.value == [1] && memtable.get(key(4 * 2048 - 1))?.value == [2])
    }
}

@Suite("Merging iterator")
struct MergingIteratorTests {
    @Test("newest wins and tombstones hide older values, across memtables and runs, against a model",
        arguments: [false, true])
    func model(dropTombstones: Bool) throws {
        let seed = SeededRandom.testSeed()
        var rng = SeededRandom(seed: seed)
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/lsm")
        // Several sources over overlapping keys; sequences increase across all writes, sources get them at random.
        var sources: [[[UInt8]: LSMEntry]] = Array(repeating: [:], count: 5)
        var newest: [[UInt8]: LSMEntry] = [:]
        for sequence in 1...4000 as ClosedRange<UInt64> {
            let key = randomKey(&rng, maxLength: 5)
            let entry: LSMEntry = rng.chance(30) ? .delete(key, sequence: sequence) : .put(key, randomValue(&rng), sequence: sequence)
            let source = rng.int(sources.count)
            if let held = sources[source][key], held.sequence > sequence { continue }
            sources[source][key] = entry
            newest[key] = entry
        }
        var children: [any LSMIterator] = []
        for (i, source) in sources.enumerated() {
            let sorted = source.values.sorted { LSMKey.less($0.key, $1.key) }
            if i < 2 {
                var memtable = Memtable()
                for entry in sorted { memtable.apply(entry) }
                children.append(memtable.makeIterator())
            } else {
                let path = try writeRun(sorted, number: UInt64(i), directory: "/lsm", fileSystem: fs)
                children.append(try SortedRunReader(path: path, fileNumber: UInt64(i), fileSystem: fs).makeIterator())
            }
        }
        let expected = newest.values.filter { !dropTombstones || !$0.isTombstone }.sorted { LSMKey.less($0.key, $1.key) }
        let merged = MergingIterator(children, dropTombstones: dropTombstones)
        #expect(try merged.entries() == expected, "seed \(seed)")
        for _ in 0..<200 {
            let key = randomKey(&rng, maxLength: 6)
            try merged.seek(key)
            let want = modelSeek(expected, key)
            #expect(merged.current == want.first, "seed \(seed)")
            try merged.advance()
            #expect(merged.current == want.dropFirst().first, "seed \(seed)")
        }
    }

    @Test("equal sequences: the child listed first wins")
    func tieBreak() throws {
        var a = Memtable()
        var b = Memtable()
        a.put([1], [0xA], sequence: 7)
        b.put([1], [0xB], sequence: 7)
        b.put([2], [0xB], sequence: 1)
        let merged = MergingIterator([a.makeIterator(), b.makeIterator()], dropTombstones: true)
        #expect(try merged.entries() == [.put([1], [0xA], sequence: 7), .put([2], [0xB], sequence: 1)])
    }
}
