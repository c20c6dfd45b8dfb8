import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@Suite("LSM reverse iterators")
struct ReverseIteratorTests {
    /// Blocks of a few entries and runs of a few blocks, so that walks cross blocks and a merged level's runs; merges
    /// only when asked, from two level-0 runs on.
    private func configuration() -> LSMTreeConfiguration {
        var c = LSMTreeConfiguration()
        c.run.blockSize = 256
        c.targetRunSize = 4 << 10
        c.level0MergeTrigger = 2
        c.backgroundMerges = false
        return c
    }

    /// The live keys of `view` below `bound` (nil: all), backwards, read with the reverse iterator.
    private func backwards(_ view: LSMReadView, before bound: [UInt8]?) throws -> [LSMEntry] {
        let it = view.makeReverseIterator()
        if let bound { try it.seek(bound) } else { try it.seekToFirst() }
        var out: [LSMEntry] = []
        while let e = it.current {
            out.append(e)
            try it.advance()
        }
        return out
    }

    @Test("walking backwards from any key gives the forward scan's keys below it, reversed — over memtables, level-0 runs and merged levels", arguments: [UInt64(1), 2, 3])
    func backwardsIsForwardsReversed(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/tree")
        let tree = try LSMTree(directory: "/tree", fileSystem: fs, configuration: configuration())
        defer { tree.close() }
        var model: [[UInt8]: [UInt8]] = [:]
        var sequence: UInt64 = 0
        for round in 0..<6 {
            for _ in 0..<300 {
                sequence += 1
                let key = randomKey(&rng)
                if rng.chance(25) {
                    try tree.delete(key, sequence: sequence)
                    model[key] = nil
                } else {
                    let value = randomValue(&rng)
                    try tree.put(key, value, sequence: sequence)
                    model[key] = value
                }
            }
            // Some rounds leave their writes in the memtable, others flush (and sometimes merge) them.
            if round % 3 != 2 { try tree.flush(logPosition: []) }
            if round == 3 { try tree.mergeUntilIdle() }
            let view = tree.readView()
            if round == 3 { #expect(tree.runs.filter { $0.level > 0 }.count > 1, "a merged level of several runs") }
            let sorted = model.keys.sorted(by: LSMKey.less)
            #expect(try backwards(view, before: nil).map(\.key) == sorted.reversed(), "seed \(seed) round \(round)")
            for _ in 0..<40 {
                let bound = rng.chance(50) ? sorted.randomElement(using: &rng) ?? [] : randomKey(&rng)
                let expected = sorted.filter { LSMKey.less($0, bound) }.reversed()
                let got = try backwards(view, before: bound)
                #expect(got.map(\.key) == Array(expected), "seed \(seed) round \(round) before \(LSMKey.printable(bound))")
                #expect(got.allSatisfy { model[$0.key] == $0.value })
            }
        }
    }

    @Test("a damaged block met walking backwards is an error naming the run, never skipped")
    func damageIsReported() throws {
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/tree")
        let tree = try LSMTree(directory: "/tree", fileSystem: fs, configuration: configuration())
        for i in 0..<400 { try tree.put(Array("key\(1000 + i)".utf8), Array(repeating: UInt8(i % 251), count: 40), sequence: UInt64(i + 1)) }
        try tree.flush(logPosition: [])
        tree.close()
        let run = try #require(try fs.listDirectory("/tree").first { $0.hasSuffix(SortedRunFile.suffix) })
        let reader = try SortedRunReader(path: "/tree/" + run, fileNumber: SortedRunFile.number(fileName: run)!, fileSystem: fs)
        let first = try #require(try reader.dataBlocks.first)
        reader.close()
        var bytes = try #require(fs.contents(of: "/tree/" + run))
        bytes[Int(first.offset + first.size / 2)] ^= 0x40
        fs.setContents(of: "/tree/" + run, to: bytes)
        let reopened = try LSMTree(directory: "/tree", fileSystem: fs, configuration: configuration())
        defer { reopened.close() }
        #expect {
            _ = try backwards(reopened.readView(), before: nil)
        } throws: { error in
            (error as? CloudletError)?.code == .corruption && "\(error)".contains(run)
        }
    }
}
