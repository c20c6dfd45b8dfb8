import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Testing

@Suite("Sorted runs")
struct SortedRunTests {
    @Test("round trip: get, seek, full and range scans agree with a dictionary model", arguments: ["posix", "memory"])
    func roundTrip(fileSystemKind: String) throws {
        let seed = SeededRandom.testSeed()
        var rng = SeededRandom(seed: seed)
        let (fs, dir, temp) = testFileSystem(fileSystemKind)
        defer { withExtendedLifetime(temp) {} }
        for round in 0..<6 {
            let entries = randomEntries([0, 1, 50, 400, 3000, 8000][round], &rng)
            var configuration = SortedRunConfiguration()
            configuration.blockSize = rng.pick([64, 256, 1024, 4096, 16384])
            configuration.restartInterval = 1 + rng.int(24)
            configuration.compression = rng.chance(70)
            let number = UInt64(round + 1)
            let path = try writeRun(
                entries, number: number, directory: dir, fileSystem: fs, configuration: configuration)
            let cache = BlockCache(capacity: 1 << 20)
            let reader = try SortedRunReader(path: path, fileNumber: number, fileSystem: fs, cache: cache)
            defer { reader.close() }
            let context = "seed \(seed) round \(round) \(configuration)"

            #expect(reader.properties.entryCount == UInt64(entries.count), "\(context)")
            #expect(reader.properties.smallestKey == (entries.first?.key ?? []), "\(context)")
            #expect(reader.properties.largestKey == (entries.last?.key ?? []), "\(context)")
            #expect(reader.properties.tombstoneCount == UInt64(entries.filter(\.isTombstone).count), "\(context)")
            #expect(reader.verify().isEmpty, "\(context)")

            for entry in entries { #expect(try reader.get(entry.key) == entry, "\(context)") }
            let present = Set(entries.map(\.key))
            for _ in 0..<300 {
                let key = randomKey(&rng, maxLength: 14)
                if !present.contains(key) { #expect(try reader.get(key) == nil, "\(context) absent key") }
            }

            let iterator = reader.makeIterator()
            #expect(try iterator.entries() == entries, "\(context) full scan")
            for _ in 0..<100 {
                let key = randomKey(&rng, maxLength: 14)
                try iterator.seek(key)
                let expected = modelSeek(entries, key)
                #expect(iterator.current == expected.first, "\(context) seek")
                // a few steps on from the seek
                for want in expected.dropFirst().prefix(5) {
                    try iterator.advance()
                    #expect(iterator.current == want, "\(context) step")
                }
            }
            for _ in 0..<30 {
                var bounds = [randomKey(&rng), randomKey(&rng)].sorted(by: LSMKey.less)
                if rng.chance(20) { bounds[0] = [] }
                let range = LSMKeyRange(lower: bounds[0], upper: rng.chance(20) ? nil : bounds[1])
                #expect(try iterator.entries(in: range) == entries.filter { range.contains($0.key) }, "\(context) range")
            }
        }
    }

    /// On "posix" the run file is mapped and blocks are checked where they lie; on "memory" they are read.
    @Test(
        "a damaged byte anywhere is detected: get and scans answer right or throw corruption; verify names it",
        arguments: ["posix", "memory"])
    func corruptionDetected(fileSystemKind: String) throws {
        let seed = SeededRandom.testSeed()
        var rng = SeededRandom(seed: seed)
        let (fs, dir, temp) = testFileSystem(fileSystemKind)
        defer { withExtendedLifetime(temp) {} }
        let entries = randomEntries(1500, &rng)
        var configuration = SortedRunConfiguration()
        configuration.blockSize = 512
        let path = try writeRun(entries, directory: dir, fileSystem: fs, configuration: configuration)
        let pristine = try fs.readFile(path)
        let model = Dictionary(uniqueKeysWithValues: entries.map { ($0.key, $0) })

        for trial in 0..<150 {
            var damaged = pristine
            let offset = trial < 16 ? pristine.count - 1 - rng.int(64) : rng.int(pristine.count)  // footer often
            damaged[offset] ^= UInt8(1 + rng.int(255))
            try fs.replaceFile(path, with: damaged)
            let context = "seed \(seed) trial \(trial) offset \(offset)"

            let reader: SortedRunReader
            do {
                reader = try SortedRunReader(path: path, fileNumber: 1, fileSystem: fs)
            } catch let error as CloudletError {
                #expect(error.code == .corruption, "\(context): \(error)")
                #expect(error.message.contains(path), "\(context): \(error)")
                continue
            }
            defer { reader.close() }
            let findings = reader.verify()
            #expect(!findings.isEmpty, "\(context): verify found nothing")
            #expect(findings.allSatisfy { $0.path == path }, "\(context)")

            for key in entries.map(\.key) + [[0x7A, 0x7A]] {
                do {
                    #expect(try reader.get(key) == model[key], "\(context): wrong answer for \(LSMKey.printable(key))")
                } catch let error as CloudletError {
                    #expect(error.code == .corruption && error.message.contains(path), "\(context): \(error)")
                }
            }
            let iterator = reader.makeIterator()
            var scanned: [LSMEntry] = []
            do {
                try iterator.seekToFirst()
                while let entry = iterator.current {
                    scanned.append(entry)
                    try iterator.advance()
                }
                // A scan reads no filter: damage there is found by point reads and verify, and the scan is right.
                #expect(findings.allSatisfy { $0.offset == reader.filterBlock.offset }, "\(context): a full scan of a damaged run succeeded")
                #expect(scanned == entries, "\(context): scan of a run with a damaged filter returned wrong entries")
            } catch let error as CloudletError {
                #expect(error.code == .corruption, "\(context): \(error)")
            }
            #expect(Array(entries.prefix(scanned.count)) == scanned, "\(context): scan returned wrong entries")
        }
    }

    @Test("both bloom filters have no false negatives and about the configured false-positive rate")
    func bloomFilter() throws {
        var rng = SeededRandom(seed: SeededRandom.testSeed())
        // The cache-local filter packs a key's bits into one block: a little more often wrong than the spread one.
        for (bitsPerKey, spreadBound, blockedBound) in [(10, 0.015, 0.02), (5, 0.12, 0.14)] {
            let keys = (0..<20_000).map { i in Array("key-\(i)-\(rng.next())".utf8) }
            let hashes = keys.map(KeyHash.hash)
            let probes = (0..<20_000).map { i in Array("other-\(i)".utf8) }
            let spread = BloomFilter(hashes: hashes, bitsPerKey: bitsPerKey)
            let blocked = BlockedBloomFilter(hashes: hashes, bitsPerKey: bitsPerKey)
            for (name, mayContain, bound) in [
                ("spread", spread.mayContain as ([UInt8]) -> Bool, spreadBound),
                ("blocked", blocked.mayContain as ([UInt8]) -> Bool, blockedBound),
            ] {
                #expect(keys.allSatisfy(mayContain), "\(name): false negative at \(bitsPerKey) bits a key")
                let rate = Double(probes.filter(mayContain).count) / Double(probes.count)
                #expect(rate < bound, "\(name): false-positive rate \(rate) at \(bitsPerKey) bits a key")
            }
            #expect(BloomFilter(encoded: spread.encoded) == spread)
            #expect(BlockedBloomFilter(encoded: blocked.encoded) == blocked)
            #expect(blocked.encoded.count == 1 + blocked.blockCount * 64)
            #expect(blocked.blockCount == (20_000 * bitsPerKey + 511) / 512)
        }
        #expect(BlockedBloomFilter(encoded: [7] + [UInt8](repeating: 0, count: 63)) == nil, "a part of a block")
        #expect(BlockedBloomFilter(encoded: [0] + [UInt8](repeating: 0, count: 64)) == nil, "no probes")
        #expect(BlockedBloomFilter(encoded: [17] + [UInt8](repeating: 0, count: 64)) == nil, "too many probes")
    }

    /// The probes are part of the on-disk format (SortedRunFormat.md, "Filter block"): a lookup answers what
    /// checking every probe of the documented formula answers, whatever it skips.
    @Test("the spread bloom filter (format 1) answers as its documented probe formula does")
    func bloomFilterProbes() throws {
        var rng = SeededRandom(seed: SeededRandom.testSeed())
        let hashes = (0..<500).map { _ in rng.next() }
        let filter = BloomFilter(hashes: hashes, bitsPerKey: 3)
        let m = UInt64(filter.bits.count * 8)
        for _ in 0..<10_000 {
            let h = rng.next()
            let delta = ((h >> 21) | (h << 43)) | 1
            let expected = (0..<UInt64(filter.probes)).allSatisfy { i in
                let bit = (h &+ i &* delta) % m
                return filter.bits[Int(bit / 8)] & (1 << UInt8(bit % 8)) != 0
            }
            #expect(filter.mayContain(hash: h) == expected, "hash \(h), \(m) bits")
        }
    }

    @Test("the cache-local bloom filter (format 2) answers as its documented probe formula does, a key's bits in one block")
    func blockedBloomFilterProbes() throws {
        var rng = SeededRandom(seed: SeededRandom.testSeed())
        for count in [1, 30, 500] {
            let hashes = (0..<count).map { _ in rng.next() }
            let filter = BlockedBloomFilter(hashes: hashes, bitsPerKey: 3)
            let bits = Array(filter.bits)
            let blocks = UInt64(filter.blockCount)
            func probed(_ h: UInt64) -> [Int] {
                // SortedRunFormat.md: block (h >> 32) × B >> 32; g₀ = h mod 2³², gᵢ₊₁ = gᵢ × 0x9E3779B9; bit gᵢ >> 23.
                let block = Int(((h >> 32) * blocks) >> 32)
                var g = UInt32(truncatingIfNeeded: h)
                var positions: [Int] = []
                for _ in 0..<filter.probes {
                    positions.append(block * 512 + Int(g >> 23))
                    g = g &* 0x9E37_79B9
                }
                return positions
            }
            for h in hashes {
                #expect(probed(h).allSatisfy { bits[$0 / 8] & (1 << UInt8($0 % 8)) != 0 }, "an added key's bit is clear")
            }
            #expect(bits.reduce(0) { $0 + $1.nonzeroBitCount } == Set(hashes.flatMap(probed)).count, "bits set that no key's probes name")
            for _ in 0..<10_000 {
                let h = rng.next()
                let expected = probed(h).allSatisfy { bits[$0 / 8] & (1 << UInt8($0 % 8)) != 0 }
                #expect(filter.mayContain(hash: h) == expected, "hash \(h), \(blocks) blocks")
            }
        }
    }

    @Test("a reader skips blocks the bloom filter rules out")
    func bloomAvoidsReads() throws {
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/lsm")
        let entries = (0..<2000).map { LSMEntry.put(Array("k\($0 * 2)".utf8), [1, 2, 3], sequence: 1) }
            .sorted { LSMKey.less($0.key, $1.key) }
        let path = try writeRun(entries, directory: "/lsm", fileSystem: fs)
        let cache = BlockCache(capacity: 1 << 20)
        let reader = try SortedRunReader(path: path, fileNumber: 1, fileSystem: fs, cache: cache)
        var absentHits = 0
        for i in 0..<2000 where try reader.get(Array("k\(i * 2 + 1)".utf8)) != nil { absentHits += 1 }
        #expect(absentHits == 0)
        // Lookups of absent keys that passed the filter read a block; the filter keeps that to a few percent.
        #expect(cache.statistics.misses + cache.statistics.hits < 100)
    }

    @Test("a failed fdatasync fails finish and leaves neither the run nor its temp file")
    func fsyncFailure() throws {
        let memory = InMemoryFileSystem()
        try memory.createDirectory("/lsm")
        let fs = FaultInjectingFileSystem(wrapping: memory)
        var rng = SeededRandom(seed: 7)
        let path = "/lsm/" + SortedRunFile.name(3)
        let writer = try SortedRunWriter(path: path, fileNumber: 3, fileSystem: fs)
        for entry in randomEntries(200, &rng) { try writer.add(entry) }
        fs.failFdatasync(nth: 1)
        let error = cloudletError { try writer.finish() }
        #expect(error?.code == .io && error?.message.contains(path) == true)
        #expect(!memory.fileExists(path))
        #expect(try memory.listDirectory("/lsm").isEmpty)
        memory.crash()
        #expect(try memory.listDirectory("/lsm").isEmpty)
    }

    @Test("file names carry the file number")
    func fileNames() {
        #expect(SortedRunFile.name(42) == "00000000000000000042.run")
        #expect(SortedRunFile.number(fileName: "00000000000000000042.run") == 42)
        #expect(SortedRunFile.number(fileName: "00000000000000000042.run.tmp") == nil)
        #expect(SortedRunFile.number(fileName: "42.run") == nil)
    }
}
