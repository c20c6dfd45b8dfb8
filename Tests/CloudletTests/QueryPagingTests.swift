import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Paging through 10,000 results with continuation markers while records are inserted and deleted between pages:
/// every record present through the whole paging appears exactly once, whatever the plan (an ordered index read
/// forwards or backwards, record names in order, candidate keys sorted in memory).
@Suite struct QueryPagingTests {
    static let total = 10_000

    struct Variant: Sendable, CustomStringConvertible {
        var name: String
        var format: String
        var sort: [QuerySort]
        /// Words the plan's order must contain.
        var order: String
        var description: String { name }
    }

    static let variants = [
        Variant(name: "ordered index forwards", format: "TRUEPREDICATE", sort: [.ascending("score")], order: "ordered index on 'score'"),
        Variant(name: "ordered index backwards", format: "score >= 0", sort: [.descending("score")], order: "backwards"),
        Variant(name: "record names", format: "TRUEPREDICATE", sort: [], order: "record names in order"),
        Variant(name: "keys sorted in memory", format: "bucket IN {1, 2, 3}", sort: [.descending("score"), .ascending("bucket")], order: "in memory"),
    ]

    func record(_ name: String, _ rng: inout SeededRandom) -> Record {
        Record(
            recordType: "Entry", recordName: name,
            fields: ["score": .int64(Int64(rng.int(100))), "bucket": .int64(Int64(rng.int(10)))])
    }

    @Test(arguments: variants)
    func pagingReturnsEachStableRecordExactlyOnceWhileRecordsChange(variant: Variant) async throws {
        var rng = SeededRandom(seed: 99)
        let dir = TempDir("query-paging")
        let store = try await openStore(dir)
        let container = try store.container(testContainer)
        let db = try container.privateDatabase(user: "u")
        var all: [Record] = []
        for i in 0..<Self.total { all.append(record(String(format: "e%05d", i), &rng)) }
        for chunk in stride(from: 0, to: all.count, by: 200) {
            _ = try await db.modify(all[chunk..<chunk + 200].map { .create($0) })
        }
        try await container.addIndexes([.queryable, .sortable], recordType: "Entry", field: "score")
        try await container.addIndexes(.queryable, recordType: "Entry", field: "bucket")
        try await container.addIndexes(.queryable, recordType: "Entry", field: "recordName")
        await store.waitForIndexBuilds()

        let query = try Query(recordType: "Entry", format: variant.format, sortDescriptors: variant.sort)
        let predicate = query.predicate
        // Every 10th record may be deleted during the paging; the others stay.
        let volatile = Set(all.indices.filter { $0 % 10 == 0 }.map { all[$0].recordName })
        let stable = all.filter { !volatile.contains($0.recordName) && predicate.matches($0) }.map(\.recordName)
        var pending = Array(volatile).sorted()
        var seen: [String: Int] = [:]
        var cursor: QueryCursor?
        var pages = 0
        var inserted = 0
        repeat {
            let page = try await db.query(query, resultsLimit: 200, continuationMarker: cursor)
            if pages == 0 { #expect(page.plan.zones[0].order.contains(variant.order), "\(page.plan)") }
            for r in page.records { seen[r.recordName, default: 0] += 1 }
            #expect(page.records.count == 200 || page.cursor == nil)
            cursor = page.cursor
            pages += 1
            // Between pages: delete 20 volatile records and insert 20 new ones, anywhere in the order.
            var ops: [RecordOperation] = []
            for _ in 0..<20 where !pending.isEmpty {
                ops.append(.forceDelete(RecordID(recordName: pending.remove(at: rng.int(pending.count)))))
            }
            for _ in 0..<20 {
                ops.append(.create(record(String(format: "n%05d", inserted), &rng)))
                inserted += 1
            }
            _ = try await db.modify(ops)
        } while cursor != nil && pages < 200
        #expect(cursor == nil, "paging did not finish in 200 pages")
        let missing = stable.filter { seen[$0] == nil }
        #expect(missing.isEmpty, "\(missing.count) stable records never appeared, e.g. \(missing.prefix(5))")
        let twice = seen.filter { $0.value > 1 }
        #expect(twice.isEmpty, "records returned more than once: \(twice.keys.sorted().prefix(5))")
        #expect(seen.count >= stable.count)
        try await store.close()
    }
}
