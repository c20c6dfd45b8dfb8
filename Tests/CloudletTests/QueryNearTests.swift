import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// NEAR queries and sorts by distance on a LOCATION field: the same answer before the spatial index exists (a scan)
/// and once it is built (issue 13: the built index returned a handful of the matches, or none).
@Suite struct QueryNearTests {
    static let center = Location(latitude: 37.7749, longitude: -122.4194)

    /// `inside` places within `km` of the center and `outside` between 1.5 and 4 times as far, in random directions.
    static func places(inside: Int, outside: Int, km: Double, prefix: String, _ rng: inout SeededRandom) -> [Record] {
        (0..<(inside + outside)).map { i in
            let d = i < inside ? Double(rng.int(1000)) / 1000 * km * 0.999 : km * (1.5 + Double(rng.int(1000)) / 400)
            let l = destination(from: center, km: d, bearing: Double(rng.int(3600)) / 10)
            return Record(recordType: "Place", recordName: "\(prefix)\(i)", fields: ["where": .location(l), "n": .int64(Int64(i))])
        }
    }

    @Test(arguments: [false, true])
    func nearReturnsEveryMatchOnceTheSpatialIndexIsBuilt(sortByDistance: Bool) async throws {
        var rng = SeededRandom(seed: 13)
        let dir = TempDir("query-near")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        var records = Self.places(inside: 200, outside: 400, km: 100, prefix: "a", &rng)
        for chunk in stride(from: 0, to: records.count, by: 200) {
            _ = try await db.modify(records[chunk..<chunk + 200].map { .create($0) })
        }
        let sort: [QuerySort] = sortByDistance ? [.distance("where", from: Self.center)] : []
        let query = Query(
            recordType: "Place", predicate: .comparison(Comparison("where", .near, .location(Self.center), distance: 100)),
            sortDescriptors: sort)
        func expected() -> [String] {
            records.filter { query.predicate.matches($0) }.sorted { modelLess($0, $1, sort) }.map(\.recordName)
        }
        func all() async throws -> (names: [String], plan: QueryPlan) {
            var names: [String] = []
            var cursor: QueryCursor?
            var plan: QueryPlan?
            repeat {
                let page = try await db.query(query, resultsLimit: 200, continuationMarker: cursor)
                names += page.records.map(\.recordName)
                plan = plan ?? page.plan
                cursor = page.cursor
            } while cursor != nil
            return (names, plan!)
        }
        // Before the index is built: the query adds it just in time and scans (the build is held meanwhile).
        store.indexBuilder.pause()
        let scanned = try await all()
        #expect(scanned.plan.zones[0].access.contains("scan"), "\(scanned.plan)")
        #expect(scanned.names.count == 200)
        #expect(scanned.names == expected())
        store.indexBuilder.resume()
        await store.waitForIndexBuilds()
        let indexed = try await all()
        #expect(indexed.plan.zones[0].access.contains("spatial index on 'where'"), "\(indexed.plan)")
        #expect(indexed.names == expected())
        // Another 600 records, 400 of them within the radius: 600 matches in all.
        let more = Self.places(inside: 400, outside: 200, km: 100, prefix: "b", &rng)
        for chunk in stride(from: 0, to: more.count, by: 200) {
            _ = try await db.modify(more[chunk..<chunk + 200].map { .create($0) })
        }
        records += more
        let after = try await all()
        #expect(after.names.count == 600)
        #expect(after.names == expected())
        try await store.close()
    }

    @Test("a record that moves a few metres keeps most of its spatial cells, whose keys' locations move with it: distance order follows the new places")
    func movedRecordsKeysCarryTheirNewLocation() async throws {
        let dir = TempDir("query-near-moved")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        // Pairs 2 m apart in distance from the center, each record of a pair on another bearing.
        func place(_ name: String, km: Double, bearing: Double) -> Record {
            Record(recordType: "Place", recordName: name, fields: ["where": .location(destination(from: Self.center, km: km, bearing: bearing))])
        }
        var records: [Record] = []
        for i in 0..<20 {
            let km = 1 + Double(i), bearing = Double(i * 17)
            records.append(place("a\(i)", km: km, bearing: bearing))
            records.append(place("b\(i)", km: km + 0.002, bearing: bearing + 90))
        }
        _ = try await db.modify(records.map { RecordOperation.create($0) })
        let query = Query(
            recordType: "Place", predicate: .comparison(Comparison("where", .near, .location(Self.center), distance: 50)),
            sortDescriptors: [.distance("where", from: Self.center)])
        _ = try await db.query(query)  // defines the spatial index; built in the background
        await store.waitForIndexBuilds()
        let before = try await db.query(query).records.map { $0.recordName }
        #expect(before == records.map { $0.recordName })
        // Each a-record moves 4 m outwards: now behind its b-record, mostly within the cells it had.
        for i in 0..<20 {
            var moved = try await db.record(for: RecordID(recordName: "a\(i)"))
            moved["where"] = .location(destination(from: Self.center, km: 1.004 + Double(i), bearing: Double(i * 17)))
            _ = try await db.save(moved)
            records[2 * i] = moved
        }
        let page = try await db.query(query)
        #expect(page.plan.zones.first?.access.contains("spatial index on 'where'") == true, "\(page.plan)")
        let expected = records.sorted { modelLess($0, $1, query.sortDescriptors) }.map { $0.recordName }
        #expect(expected.prefix(2) == ["b0", "a0"])
        #expect(page.records.map { $0.recordName } == expected)
        let problems = try store.partitions[0].state.withLock { try $0.secondaryIndexProblems() }
        #expect(problems.isEmpty, "\(problems)")
        try await store.close()
    }
}
