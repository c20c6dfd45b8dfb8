import CloudletCore
import Foundation
import Testing

@testable import Cloudlet

/// Queries through the engine: schema rules per environment, the planner's choices, paging, counts.
@Suite struct QueryTests {
    func book(_ i: Int, zone: ZoneID = .default) -> Record {
        var r = Record(recordType: "Book", recordName: String(format: "b%03d", i), zoneID: zone)
        r["title"] = .string(["Swift in Depth", "The Art of Databases", "Cooking with Coffee", "A Tale of Two Logs"][i % 4])
        r["kind"] = .string(i % 3 == 0 ? "novel" : "manual")
        r["price"] = .int64(Int64(10 + i % 17))
        r["tags"] = .list(.string, [.string("t\(i % 5)")])
        r["where"] = .location(Location(latitude: 48 + Double(i % 10) / 10, longitude: 2 + Double(i % 7) / 10))
        return r
    }

    func names(_ rs: [Record]) -> [String] { rs.map(\.recordName) }

    @Test func developmentAddsIndexesJustInTimeAndScansUntilTheyAreBuilt() async throws {
        let dir = TempDir("query-dev")
        let store = try await openStore(dir)
        let container = try store.container(testContainer)
        let db = try container.privateDatabase(user: "u")
        _ = try await db.modify((0..<60).map { .create(book($0)) })
        let q = try Query(recordType: "Book", format: "kind == 'novel' AND price < 15")
        let first = try await db.query(q)
        let expected = (0..<60).filter { $0 % 3 == 0 && 10 + $0 % 17 < 15 }.map { String(format: "b%03d", $0) }
        #expect(names(first.records) == expected)
        #expect(first.plan.notes.contains { $0.contains("added QUERYABLE to 'kind'") && $0.contains("SORTABLE to 'price'") }, "\(first.plan)")
        let schema = container.schema(environment: .development).first { $0.name == "Book" }!
        #expect(schema.indexes["kind"] == .queryable && schema.indexes["price"] == .sortable)
        await store.waitForIndexBuilds()
        let second = try await db.query(q)
        #expect(names(second.records) == expected)
        #expect(second.plan.zones[0].usesIndex, "\(second.plan)")
        #expect(second.plan.notes.isEmpty, "\(second.plan)")
        // The most selective index wins: 20 novels, but only a few books under 12.
        let cheap = try Query(recordType: "Book", format: "kind == 'novel' AND price < 12")
        let plan = try await db.explain(cheap)
        #expect(plan.zones[0].indexedFields == ["price"], "\(plan)")
        #expect(plan.zones[0].candidates == (0..<60).filter { 10 + $0 % 17 < 12 }.count)
        try await store.close()
    }

    @Test func sortsPagesAndContinuationMarkers() async throws {
        let dir = TempDir("query-pages")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        _ = try await db.modify((0..<90).map { .create(book($0)) })
        let q = Query(recordType: "Book", sortDescriptors: [.descending("price")])
        var seen: [Record] = []
        var cursor: QueryCursor?
        repeat {
            let page = try await db.query(q, resultsLimit: 20, continuationMarker: cursor)
            #expect(page.records.count <= 20)
            seen += page.records
            cursor = page.cursor
        } while cursor != nil
        #expect(seen.count == 90)
        #expect(Set(names(seen)).count == 90)
        let prices = seen.map { $0["price"]!.int64Value! }
        #expect(prices == prices.sorted(by: >))
        // Ties go in the direction of the last descriptor: descending names within a price.
        for (a, b) in zip(seen, seen.dropFirst()) where a["price"] == b["price"] { #expect(a.recordName > b.recordName) }
        try await store.close()
    }

    @Test func markersAreValidated() async throws {
        let dir = TempDir("query-marker")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        _ = try await db.modify((0..<30).map { .create(book($0)) })
        let q = Query(recordType: "Book", sortDescriptors: [.ascending("price")])
        let page = try await db.query(q, resultsLimit: 5)
        let cursor = try #require(page.cursor)
        let other = Query(recordType: "Book", sortDescriptors: [.descending("price")])
        let e = await expectError(.invalidArguments) { try await db.query(other, continuationMarker: cursor) }
        #expect(e?.message.contains("another query") == true)
        await expectError(.invalidArguments) { try await db.query(q, continuationMarker: QueryCursor(marker: "AAAA")) }
        var bytes = Base64.decode(cursor.marker)!
        bytes[bytes.count / 2] ^= 1
        await expectError(.invalidArguments) { try await db.query(q, continuationMarker: QueryCursor(marker: Base64.encode(bytes))) }
        try await store.close()
    }
}
