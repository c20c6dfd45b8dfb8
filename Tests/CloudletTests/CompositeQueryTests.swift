import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Queries on composite indexes: the plan (one range walk that stops at the page, explained), counts read off the
/// index, and the randomized comparison with brute force in every state of the indexes.
extension CompositeIndexTests {
    @Test func plansExplainsAndCounts() async throws {
        let dir = TempDir("composite-plan")
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        let db = try c.privateDatabase(user: "u")
        var ops: [RecordOperation] = []
        for i in 0..<300 {
            var r = Record(recordType: "Photo", recordName: "p\(i)")
            r["photographer"] = .reference(Reference(recordName: "ph\(i % 3)"))
            if i % 10 != 0 { r["taken"] = .timestamp(Int64(1000 + i * 7 % 101)) }
            r["rating"] = .int64(Int64(i % 5))
            ops.append(.create(r))
        }
        _ = try await db.modify(Array(ops[..<150]))
        _ = try await db.modify(Array(ops[150...]))
        try await c.importSchema(Self.text)
        await store.waitForIndexBuilds()
        let by = Predicate.comparison(Comparison("photographer", .equals, .reference(Reference(recordName: "ph1"))))
        let q = Query(recordType: "Photo", predicate: by, sortDescriptors: [QuerySort("taken", ascending: false)])
        let plan = try await db.explain(q, resultsLimit: 10)
        #expect(plan.zones[0].access.hasPrefix("composite index 'byPhotographer'"), "\(plan)")
        #expect(plan.zones[0].order == "composite index 'byPhotographer' within the range", "\(plan)")
        let page = try await db.query(q, resultsLimit: 10)
        // The page and one more (which tells that there are more), of 100 candidates.
        #expect(page.plan.zones[0].examined == 11 && page.plan.zones[0].candidates == 11, "reads the page only: \(page.plan)")
        let expected = (0..<300).filter { $0 % 3 == 1 }.sorted {
            let (a, b) = ($0 % 10 == 0 ? nil : 1000 + $0 * 7 % 101, $1 % 10 == 0 ? nil : 1000 + $1 * 7 % 101)
            return a != b ? (a ?? -1) > (b ?? -1) : "p\($0)" > "p\($1)"
        }.prefix(10).map { "p\($0)" }
        #expect(page.records.map(\.recordName) == expected)
        #expect(page.plan.zones[0].sortedInMemory == false)
        let reversed = try await db.explain(Query(recordType: "Photo", predicate: by, sortDescriptors: [QuerySort("taken")]), resultsLimit: 10)
        #expect(reversed.zones[0].order == "composite index 'byPhotographer' within the range, backwards", "\(reversed)")

        // A count whose predicate the index answers exactly reads no record; one it does not, reads candidates.
        let ranged = Predicate.and([by, .comparison(Comparison("taken", .greaterThanOrEquals, .timestamp(1050)))])
        let counted = try await db.explainCount(Query(recordType: "Photo", predicate: ranged))
        #expect(counted.zones[0].order == "counted in the index, no record read", "\(counted)")
        let n = try await db.count(Query(recordType: "Photo", predicate: ranged))
        let all = try await db.query(Query(recordType: "Photo", predicate: ranged), resultsLimit: 200)
        #expect(n == all.records.count && n > 0)
        let loose = Predicate.and([by, .comparison(Comparison("taken", .notEquals, .timestamp(1050)))])
        #expect(try await db.explainCount(Query(recordType: "Photo", predicate: loose)).zones[0].order == "none needed (count)")
        try await store.close()
    }
}

extension QueryPropertyTests {
    /// The composite indexes the property test declares on `Thing`: a reference and a timestamp descending, an
    /// integer and a double, three fields (the last a BYTES), a reference and a string, a string (case-folded) and an
    /// integer descending.
    static let compositeIndexes = [
        CompositeIndex(name: "refT", components: [IndexComponent("ref"), IndexComponent("t", descending: true)]),
        CompositeIndex(name: "nD", components: [IndexComponent("n"), IndexComponent("d")]),
        CompositeIndex(name: "tNB", components: [IndexComponent("t"), IndexComponent("n", descending: true), IndexComponent("b")]),
        CompositeIndex(name: "refS", components: [IndexComponent("ref"), IndexComponent("s")]),
        CompositeIndex(name: "sN", components: [IndexComponent("s"), IndexComponent("n", descending: true)]),
    ]

    /// A query a composite index can answer: equalities on a prefix of one index's fields, perhaps one or two
    /// ranges on the next, sorted by the next field (either way) or by something else, sometimes with another
    /// comparison ANDed (so the index finds a superset).
    func compositeQuery(_ rng: inout SeededRandom) -> (Predicate, [QuerySort]) {
        let index = rng.pick(Self.compositeIndexes)
        let k = 1 + rng.int(index.components.count)
        var parts: [Predicate] = index.components.prefix(min(k, index.components.count)).map {
            .comparison(Comparison($0.field, .equals, scalar($0.field, &rng)))
        }
        var sorts: [QuerySort] = []
        if k < index.components.count {
            let next = index.components[k].field
            for _ in 0..<rng.int(3) {
                let op = rng.pick([Comparator.lessThan, .lessThanOrEquals, .greaterThan, .greaterThanOrEquals])
                parts.append(.comparison(Comparison(next, op, scalar(next, &rng))))
            }
            if rng.chance(80) { sorts = [QuerySort(next, ascending: rng.chance(50))] }
        }
        if rng.chance(15) { sorts = self.sorts(&rng) }
        if rng.chance(15) {
            var extra = comparison(&rng)
            while Self.refused(extra) != nil { extra = comparison(&rng) }
            parts.append(extra)
        }
        return (parts.count == 1 ? parts[0] : .and(parts), sorts)
    }

    /// The randomized test again, with queries the composite indexes answer, in each state of the indexes: absent
    /// (not declared), building (declared, build held), built, with records changing between pages, and reopened.
    @Test(arguments: [21 as UInt64, 22])
    func compositeQueriesMatchABruteForceScan(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let dir = TempDir("composite-property")
        var (store, db, records) = try await randomStore(dir, &rng)
        let queries: Queries = { compositeQuery(&$0) }
        let absent = try await check(db, records: Array(records.values), seed: seed, phase: "absent", count: 20, queries: queries, &rng)
        #expect(absent.composite == 0)
        store.indexBuilder.pause()
        for index in Self.compositeIndexes {
            try await store.container(testContainer).addCompositeIndex(index, recordType: "Thing")
        }
        let building = try await check(db, records: Array(records.values), seed: seed, phase: "building", count: 20, queries: queries, &rng)
        #expect(building.composite == 0)
        store.indexBuilder.resume()
        await store.waitForIndexBuilds()
        let built = try await check(db, records: Array(records.values), seed: seed, phase: "built", count: 40, queries: queries, &rng)
        #expect(built.composite > built.plans / 4, "plans using a composite index: \(built.composite) of \(built.plans)")
        #expect(built.countedInIndex > 0, "no count was read off an index")
        try await checkWhileChanging(db, records: &records, seed: seed, count: 10, queries: queries, &rng)
        (store, db) = try await reopened(store, dir)
        let reopened = try await check(
            db, records: records.values.compactMap { $0 }, seed: seed, phase: "reopened", count: 30, queries: queries, &rng)
        #expect(reopened.composite > reopened.plans / 4, "plans using a composite index after reopening: \(reopened.composite) of \(reopened.plans)")
        try await store.close()
    }
}
