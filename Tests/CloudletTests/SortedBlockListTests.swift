import CloudletTestSupport
import Testing

@testable import Cloudlet

/// The ordered structure under SORTABLE indexes, against a sorted-array model.
@Suite struct SortedBlockListTests {
    @Test(arguments: [1 as UInt64, 2, 3, 4])
    func randomInsertsAndRemovesMatchASortedArray(seed: UInt64) {
        var rng = SeededRandom(seed: seed)
        var list = SortedBlockList<Int>(blockCapacity: 8)
        var model: [Int] = []
        for step in 0..<4000 {
            let v = rng.int(600)
            let i = model.firstIndex { $0 >= v } ?? model.count
            let present = i < model.count && model[i] == v
            // Bias towards inserting first, then towards removing, so the list grows and shrinks again.
            if rng.int(100) < (step < 2500 ? 70 : 25) {
                #expect(list.insert(v) == !present, "seed \(seed) step \(step): insert \(v)")
                if !present { model.insert(v, at: i) }
            } else {
                #expect(list.remove(v) == present, "seed \(seed) step \(step): remove \(v)")
                if present { model.remove(at: i) }
            }
            if step % 97 == 0 {
                #expect(list.checkInvariants() == nil, "seed \(seed) step \(step): \(list.checkInvariants() ?? "")")
                #expect(list.all == model, "seed \(seed) step \(step)")
            }
        }
        #expect(list.checkInvariants() == nil)
        #expect(list.all == model)
        #expect(list.count == model.count)
    }

    @Test func boundsDistancesAndIterationBothWays() {
        var rng = SeededRandom(seed: 7)
        var list = SortedBlockList<Int>(blockCapacity: 4)
        var model = Set<Int>()
        for _ in 0..<300 {
            let v = rng.int(1000) * 2  // even numbers only, so odd probes fall between elements
            list.insert(v)
            model.insert(v)
        }
        let sorted = model.sorted()
        for probe in stride(from: -1, through: 2001, by: 1) {
            let lo = list.lowerBound(probe)
            let hi = list.upperBound(probe)
            let expectLo = sorted.firstIndex { $0 >= probe } ?? sorted.count
            let expectHi = sorted.firstIndex { $0 > probe } ?? sorted.count
            #expect(list.distance(from: list.startIndex, to: lo) == expectLo, "lowerBound(\(probe))")
            #expect(list.distance(from: list.startIndex, to: hi) == expectHi, "upperBound(\(probe))")
            #expect(list.contains(probe) == model.contains(probe))
        }
        #expect(list.elements(from: list.lowerBound(100), to: list.lowerBound(301)) == sorted.filter { $0 >= 100 && $0 < 301 })
        var backwards: [Int] = []
        var i = list.endIndex
        while i > list.startIndex {
            i = list.index(before: i)
            backwards.append(list[i])
        }
        #expect(backwards == sorted.reversed())
    }

    @Test func bulkBuildFromSortedElements() {
        var list = SortedBlockList(sorted: (0..<1000).map { $0 * 3 }, blockCapacity: 16)
        #expect(list.checkInvariants() == nil)
        #expect(list.count == 1000)
        #expect(list.blocks.allSatisfy { $0.count <= 12 })
        #expect(list.insert(4) && list.remove(0) && !list.remove(1))
        #expect(list.first == 3 && list.last == 2997)
        #expect(list.checkInvariants() == nil)
    }

    @Test func ascendingInsertsFillBlocksAndSplitThem() {
        // Ascending inserts always land in the last block: it splits when full and the list grows block by block.
        var list = SortedBlockList<Int>(blockCapacity: 64)
        for v in 0..<100_000 { list.insert(v) }
        #expect(list.count == 100_000)
        #expect(list.blocks.count >= 100_000 / 64)
        #expect(list.checkInvariants() == nil)
    }
}
