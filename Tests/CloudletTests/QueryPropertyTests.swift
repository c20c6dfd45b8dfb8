import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Seeded property test: random records with every field type, random predicates using every comparator (and
/// AND / OR / NOT / BETWEEN), random sorts and page sizes. Every query's pages, concatenated, must equal a
/// brute-force evaluation of `Predicate.matches` over all records sorted by the model order — before the
/// just-in-time indexes exist (scans), once they are built (index plans), and after the data changed under them.
@Suite struct QueryPropertyTests {
    static let paris = Location(latitude: 48.8566, longitude: 2.3522)
    static let centers = [
        paris, Location(latitude: 40.7128, longitude: -74.0060), Location(latitude: 35.6762, longitude: 139.6503),
        Location(latitude: 0.5, longitude: 179.95), Location(latitude: -0.5, longitude: -179.95),
        Location(latitude: 89.95, longitude: 10),
    ]
    static let strings = ["apple", "Apple", "APPLE", "banana", "band", "cherry", "Éclair", "eclair", "", "fig tree"]
    static let words = ["coffee", "Café", "database", "swift", "the", "log", "quick", "brown", "fox", "crème"]
    static let doubles: [Double] = [-1.5, -0.0, 0, 0.5, 2, 2.5, 3.25, 1e10]
    static let timestamps: [Int64] = [0, 1_000, 1_700_000_000_000, 1_700_000_000_001, -5]
    static let byteValues: [[UInt8]] = [[], [0], [0, 1], [1], [255], [1, 0]]
    static let refNames = ["r0", "r1", "r2", "R1", "x9"]
    static let tagValues = ["red", "green", "blue", "Red", "dark red"]

    func randomRecord(_ name: String, zone: ZoneID, _ rng: inout SeededRandom) -> Record {
        var r = Record(recordType: "Thing", recordName: name, zoneID: zone)
        if rng.chance(85) { r["s"] = .string(rng.pick(Self.strings)) }
        if rng.chance(85) { r["n"] = .int64(Int64(rng.int(11) - 5)) }
        if rng.chance(85) { r["d"] = .double(rng.pick(Self.doubles)) }
        if rng.chance(85) { r["t"] = .timestamp(rng.pick(Self.timestamps)) }
        if rng.chance(80) { r["b"] = .bytes(rng.pick(Self.byteValues)) }
        if rng.chance(80) {
            let c = rng.pick(Self.centers)
            var lon = c.longitude + Double(rng.int(200) - 100) / 100
            if lon > 180 { lon -= 360 } else if lon < -180 { lon += 360 }
            r["loc"] = .location(Location(latitude: min(90, c.latitude + Double(rng.int(200) - 100) / 100), longitude: lon))
        }
        if rng.chance(80) { r["ref"] = .reference(Reference(recordName: rng.pick(Self.refNames))) }
        if rng.chance(80) { r["tags"] = .list(.string, rng.subset(Self.tagValues).map { .string($0) }) }
        if rng.chance(80) { r["nums"] = .list(.int64, rng.subset([0, 1, 2, 3, 4]).map { .int64($0) }) }
        if rng.chance(85) { r["text"] = .string((0..<(1 + rng.int(4))).map { _ in rng.pick(Self.words) }.joined(separator: " ")) }
        return r
    }

    func scalar(_ field: String, _ rng: inout SeededRandom) -> FieldValue {
        switch field {
        case "s": return .string(rng.pick(Self.strings + ["app", "b", "zzz"]))
        case "n": return rng.chance(70) ? .int64(Int64(rng.int(13) - 6)) : .double(Double(rng.int(13) - 6) + 0.5)
        case "d": return rng.chance(70) ? .double(rng.pick(Self.doubles)) : .int64(Int64(rng.int(5) - 1))
        case "t", "createdTimestamp", "modifiedTimestamp": return .timestamp(rng.pick(Self.timestamps + [999, 2_000_000_000_000]))
        case "b": return .bytes(rng.pick(Self.byteValues))
        case "ref": return rng.chance(50) ? .reference(Reference(recordName: rng.pick(Self.refNames))) : .string(rng.pick(Self.refNames))
        case "recordName": return rng.chance(70) ? .string("t\(rng.int(40))") : .reference(Reference(recordName: "t\(rng.int(40))"))
        case "tags": return .string(rng.pick(Self.tagValues + ["purple"]))
        case "nums": return .int64(Int64(rng.int(6)))
        default: return .string(rng.pick(Self.words))
        }
    }

    func list(_ field: String, _ rng: inout SeededRandom) -> FieldValue {
        let items = (0..<rng.int(4)).map { _ in scalar(field, &rng) }
        let numbers = items.allSatisfy { $0.int64Value != nil || $0.doubleValue != nil }
        if numbers && items.contains(where: { $0.doubleValue != nil }) {
            return .list(.double, items.map { $0.int64Value.map { .double(Double($0)) } ?? $0 })
        }
        let type = items.first?.type.scalar ?? .string
        return .list(type, items.filter { $0.type.scalar == type })
    }

    func comparison(_ rng: inout SeededRandom) -> Predicate {
        let field = rng.pick(["s", "n", "d", "t", "b", "loc", "ref", "tags", "nums", "text", "recordName", "createdTimestamp", fullTextField])
        let c: Comparison
        switch field {
        case "loc":
            let center = rng.pick(Self.centers)
            c = Comparison("loc", .near, .location(center), distance: rng.pick([1, 60, 150, 800, 5000, 21000]))
        case "text", fullTextField:
            let words = (0..<(1 + rng.int(2))).map { _ in rng.pick(Self.words + ["nothing"]) }.joined(separator: " ")
            c = Comparison(field, rng.chance(50) ? .containsAllTokens : .containsAnyTokens, .string(words))
        case "tags", "nums":
            let op = rng.pick([
                Comparator.listContains, .notListContains, .listContainsAny, .notListContainsAny, .listContainsAll,
                .notListContainsAll, .listMemberBeginsWith, .notListMemberBeginsWith, .containsAnyTokens,
            ])
            switch op {
            case .listContainsAny, .notListContainsAny, .listContainsAll, .notListContainsAll:
                c = Comparison(field, op, list(field, &rng))
            case .listMemberBeginsWith, .notListMemberBeginsWith:
                c = Comparison(field, op, .string(rng.pick(["r", "R", "g", "dark", "x"])))
            case .containsAnyTokens:
                c = Comparison(field, op, .string(rng.pick(["red", "dark", "blue green"])))
            default:
                c = Comparison(field, op, scalar(field, &rng))
            }
        default:
            let op = rng.pick([
                Comparator.equals, .notEquals, .lessThan, .lessThanOrEquals, .greaterThan, .greaterThanOrEquals, .in,
                .notIn, .beginsWith, .notBeginsWith,
            ])
            switch op {
            case .in, .notIn: c = Comparison(field, op, list(field, &rng))
            case .beginsWith, .notBeginsWith:
                c = Comparison(field, op, .string(rng.pick(["a", "A", "b", "ban", "t1", "Éc", ""])))
            default: c = Comparison(field, op, scalar(field, &rng))
            }
        }
        return .comparison(c)
    }

    func predicate(_ rng: inout SeededRandom, depth: Int = 0) -> Predicate {
        let roll = rng.int(100)
        if depth >= 2 || roll < 45 { return comparison(&rng) }
        if roll < 47 { return rng.chance(50) ? .all : .none }
        if roll < 57 {
            // BETWEEN
            let field = rng.pick(["n", "d", "s", "t", "recordName"])
            let a = scalar(field, &rng), b = scalar(field, &rng)
            return .and([
                .comparison(Comparison(field, .greaterThanOrEquals, a)), .comparison(Comparison(field, .lessThanOrEquals, b)),
            ])
        }
        if roll < 65 { return .not(predicate(&rng, depth: depth + 1)) }
        let parts = (0..<(2 + rng.int(2))).map { _ in predicate(&rng, depth: depth + 1) }
        return roll < 85 ? .and(parts) : .or(parts)
    }

    func sorts(_ rng: inout SeededRandom) -> [QuerySort] {
        (0..<rng.int(3)).map { _ in
            if rng.chance(15) { return .distance("loc", from: rng.pick(Self.centers)) }
            return QuerySort(rng.pick(["s", "n", "d", "t", "b", "ref", "recordName", "createdTimestamp"]), ascending: rng.chance(50))
        }
    }

    func searchableFields(_ db: Database) throws -> Set<String> {
        let type = try db.store.container(testContainer).schema(environment: .development).first { $0.name == "Thing" }
        return Set(type?.indexes.filter { $0.value.contains(.searchable) }.keys.map { $0 } ?? [])
    }

    /// Runs `count` random queries and checks each against the brute-force answer. Returns how many zone plans
    /// used an index.
    func check(
        _ db: Database, records: [Record], searchable: Set<String>?, seed: UInt64, phase: String, count: Int,
        _ rng: inout SeededRandom
    ) async throws -> (indexed: Int, plans: Int) {
        var indexed = 0
        var plans = 0
        let zones = [ZoneID.default, ZoneID(zoneName: "Z")]
        for i in 0..<count {
            let p = predicate(&rng)
            let s = sorts(&rng)
            let q = Query(recordType: "Thing", predicate: p, sortDescriptors: s)
            let zoneWide = rng.chance(30)
            let zone = zoneWide ? ZoneID.default : rng.pick(zones)
            let limit = rng.pick([7, 30, 200])
            let schemaSearchable = try searchable ?? searchableFields(db)
            let expected = records.filter { (zoneWide || $0.id.zoneID.zoneName == zone.zoneName) && p.matches($0, searchable: schemaSearchable) }
                .sorted { modelLess($0, $1, s) }
            var got: [Record] = []
            var cursor: QueryCursor?
            var pages = 0
            repeat {
                let page = try await db.query(q, zoneID: zone, zoneWide: zoneWide, resultsLimit: limit, continuationMarker: cursor)
                got += page.records
                cursor = page.cursor
                pages += 1
                plans += page.plan.zones.count
                indexed += page.plan.zones.filter(\.usesIndex).count
                if pages > 100 { break }
            } while cursor != nil
            let context = "seed \(seed) \(phase) query \(i): \(p) sort \(s) zone \(zoneWide ? "*" : zone.zoneName) limit \(limit)"
            #expect(got.map(\.id) == expected.map(\.id), "\(context)")
            if i % 4 == 0 {
                let n = try await db.count(Query(recordType: "Thing", predicate: p), zoneID: zone, zoneWide: zoneWide)
                #expect(n == expected.count, "count: \(context)")
            }
            if got.map(\.id) != expected.map(\.id) { break }
        }
        return (indexed, plans)
    }

    @Test(arguments: [11 as UInt64, 12])
    func queriesMatchABruteForceScan(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let dir = TempDir("query-property")
        let store = try await openStore(dir, partitions: 2)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        let z = ZoneID(zoneName: "Z")
        try await db.createZone(z)
        var records: [String: Record] = [:]  // "zone/name" → record
        func key(_ r: Record) -> String { r.id.zoneID.zoneName + "/" + r.recordName }
        var ops: [RecordOperation] = []
        for i in 0..<160 { ops.append(.create(randomRecord("t\(i)", zone: .default, &rng))) }
        for i in 0..<60 { ops.append(.create(randomRecord("t\(i)", zone: z, &rng))) }
        for chunk in stride(from: 0, to: ops.count, by: 100) {
            for r in try await db.modify(Array(ops[chunk..<min(chunk + 100, ops.count)])) { records[key(r.record!)] = r.record! }
        }
        // Phase 1: every index is added just in time; the queries scan.
        let (scanIndexed, _) = try await check(db, records: Array(records.values), searchable: nil, seed: seed, phase: "scan", count: 60, &rng)
        await store.waitForIndexBuilds()
        // Phase 2: the same kinds of queries with the indexes built.
        let (indexed, plans) = try await check(db, records: Array(records.values), searchable: nil, seed: seed, phase: "indexed", count: 60, &rng)
        #expect(indexed > plans / 6, "plans using an index once built: \(indexed) of \(plans) (while building: \(scanIndexed))")
        // Phase 3: change the data under the indexes (updates, deletes, inserts), then query again.
        ops = []
        var touched: Set<String> = []
        for (k, r) in records.sorted(by: { $0.key < $1.key }) where rng.chance(35) {
            touched.insert(k)
            if rng.chance(30) {
                ops.append(.forceDelete(r.id))
            } else {
                var n = randomRecord(r.recordName, zone: r.id.zoneID, &rng)
                n.changeTag = r.changeTag
                ops.append(.forceReplace(n))
            }
        }
        for i in 160..<190 { ops.append(.create(randomRecord("t\(i)", zone: rng.chance(50) ? .default : z, &rng))) }
        for chunk in stride(from: 0, to: ops.count, by: 100) {
            let batch = Array(ops[chunk..<min(chunk + 100, ops.count)])
            for (op, result) in zip(batch, try await db.modify(batch)) {
                let k = op.recordID.zoneID.zoneName + "/" + op.recordID.recordName
                if let r = result.record { records[k] = r } else { records[k] = nil }
            }
        }
        _ = try await check(db, records: Array(records.values), searchable: nil, seed: seed, phase: "changed", count: 60, &rng)
        try await store.close()
    }
}
