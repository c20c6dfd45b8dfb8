import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Seeded property test: random records with every field type, random predicates using every comparator (and
/// AND / OR / NOT / BETWEEN; NEAR around random points with radii from 0 to the whole earth), random sorts (by
/// fields, by distance from random points) and page sizes. Every query's pages, concatenated, must equal a
/// brute-force evaluation of `Predicate.matches` over all records sorted by the model order, whichever plan runs:
/// with the just-in-time indexes still building (scans), once they are built (index plans), after the data changed
/// under them, and after the store was closed and reopened (indexes rebuilt from the checkpoint). A page carries a
/// marker exactly when more matches remain. Paging while records are inserted and deleted between pages returns
/// every record present throughout exactly once, in order. A comparator that cannot apply to its field's type is
/// refused naming both. Each failure names its seed, phase and query; the seeds are fixed, so a failure replays.
@Suite struct QueryPropertyTests {
    static let paris = Location(latitude: 48.8566, longitude: 2.3522)
    static let centers = [
        paris, Location(latitude: 40.7128, longitude: -74.0060), Location(latitude: 35.6762, longitude: 139.6503),
        Location(latitude: 0.5, longitude: 179.95), Location(latitude: -0.5, longitude: -179.95),
        Location(latitude: 89.95, longitude: 10),
    ]
    static let strings = ["apple", "Apple", "APPLE", "banana", "band", "cherry", "Éclair", "eclair", "", "fig tree"]
    static let words = ["coffee", "Café", "database", "swift", "the", "log", "quick", "brown", "fox", "crème"]
    /// Prefix search terms: of several tokens (coffee, café, crème), of one, of a stop word, of none.
    static let prefixTerms = ["c*", "Caf*", "dat*", "th*", "zz*"]
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
            if rng.chance(75) {
                let c = rng.pick(Self.centers)
                var lon = c.longitude + Double(rng.int(200) - 100) / 100
                if lon > 180 { lon -= 360 } else if lon < -180 { lon += 360 }
                r["loc"] = .location(Location(latitude: min(90, c.latitude + Double(rng.int(200) - 100) / 100), longitude: lon))
            } else {
                r["loc"] = .location(anywhere(&rng))
            }
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

    /// A location anywhere on earth.
    func anywhere(_ rng: inout SeededRandom) -> Location {
        Location(latitude: Double(rng.int(179_800)) / 1000 - 89.9, longitude: Double(rng.int(360_000)) / 1000 - 180)
    }

    /// A point for NEAR or a distance sort: up to 300 km from a cluster of records, one of the clusters' centres
    /// (poles and the antimeridian among them), or anywhere.
    func point(_ rng: inout SeededRandom) -> Location {
        switch rng.int(4) {
        case 0, 1: destination(from: rng.pick(Self.centers), km: Double(rng.int(300_000)) / 1000, bearing: Double(rng.int(3600)) / 10)
        case 2: rng.pick(Self.centers)
        default: anywhere(&rng)
        }
    }

    /// A NEAR radius in km: 0, the whole earth, or 100 m to 5,000 km spread evenly on a log scale.
    func radius(_ rng: inout SeededRandom) -> Double {
        switch rng.int(20) {
        case 0: 0
        case 1: 21_000
        default: 0.1 * pow(10, Double(rng.int(1000)) / 1000 * 4.7)
        }
    }

    /// Each field's type in the schema the records make.
    static let types: [String: FieldType] = [
        "s": FieldType(.string), "n": FieldType(.int64), "d": FieldType(.double), "t": FieldType(.timestamp),
        "b": FieldType(.bytes), "loc": FieldType(.location), "ref": FieldType(.reference),
        "tags": FieldType(.string, list: true), "nums": FieldType(.int64, list: true), "text": FieldType(.string),
        "recordName": FieldType(.string), "createdTimestamp": FieldType(.timestamp),
    ]

    /// Whether no value of a field of type `type` can match comparator `op` (written apart from the engine's rule):
    /// NEAR needs a LOCATION, the prefix comparisons a STRING (list members: a STRING or a list of them), the token
    /// searches text.
    static func cannotApply(_ op: Comparator, to type: FieldType) -> Bool {
        switch op {
        case .near: type != FieldType(.location)
        case .beginsWith, .notBeginsWith: type != FieldType(.string)
        case .listMemberBeginsWith, .notListMemberBeginsWith, .containsAllTokens, .containsAnyTokens: type.scalar != .string
        default: false
        }
    }

    /// The first comparison of `p` the query must be refused for.
    static func refused(_ p: Predicate) -> Comparison? {
        p.comparisons.first { c in Self.types[c.field].map { Self.cannotApply(c.comparator, to: $0) } ?? false }
    }

    /// A comparison whose comparator cannot apply to its field's type.
    func mismatch(_ rng: inout SeededRandom) -> Comparison {
        switch rng.int(4) {
        case 0: Comparison(rng.pick(["n", "s", "t", "tags"]), .near, .location(point(&rng)), distance: radius(&rng))
        case 1: Comparison(rng.pick(["n", "d", "b", "ref", "tags", "loc"]), rng.chance(50) ? .beginsWith : .notBeginsWith, "a")
        case 2: Comparison(rng.pick(["n", "loc", "nums", "t"]), rng.chance(50) ? .containsAllTokens : .containsAnyTokens, "red")
        default: Comparison(rng.pick(["nums", "n", "createdTimestamp"]), rng.chance(50) ? .listMemberBeginsWith : .notListMemberBeginsWith, "1")
        }
    }

    func comparison(_ rng: inout SeededRandom) -> Predicate {
        if rng.chance(3) { return .comparison(mismatch(&rng)) }
        let field = rng.pick([
            "s", "n", "d", "t", "b", "loc", "loc", "ref", "tags", "nums", "text", "recordName", "createdTimestamp", fullTextField,
        ])
        let c: Comparison
        switch field {
        case "loc":
            c = Comparison("loc", .near, .location(point(&rng)), distance: radius(&rng))
        case "text", fullTextField:
            let words = (0..<(1 + rng.int(2))).map { _ in rng.pick(Self.words + ["nothing"] + Self.prefixTerms) }.joined(separator: " ")
            c = Comparison(field, rng.chance(50) ? .containsAllTokens : .containsAnyTokens, .string(words))
        case "tags", "nums":
            var ops: [Comparator] = [
                .listContains, .notListContains, .listContainsAny, .notListContainsAny, .listContainsAll, .notListContainsAll,
            ]
            if field == "tags" { ops += [.listMemberBeginsWith, .notListMemberBeginsWith, .containsAnyTokens] }
            let op = rng.pick(ops)
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
            var ops: [Comparator] = [.equals, .notEquals, .lessThan, .lessThanOrEquals, .greaterThan, .greaterThanOrEquals, .in, .notIn]
            if Self.types[field] == FieldType(.string) { ops += [.beginsWith, .notBeginsWith] }
            let op = rng.pick(ops)
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

    /// A query about place: NEAR alone, or ANDed with another predicate (so that the spatial index is what the
    /// planner picks, or competes).
    func nearPredicate(_ rng: inout SeededRandom) -> Predicate {
        let near = Predicate.comparison(Comparison("loc", .near, .location(point(&rng)), distance: radius(&rng)))
        return rng.chance(50) ? near : .and([near, predicate(&rng, depth: 1)])
    }

    func sorts(_ rng: inout SeededRandom) -> [QuerySort] {
        (0..<rng.int(3)).map { _ in
            if rng.chance(25) { return .distance("loc", from: point(&rng)) }
            return QuerySort(rng.pick(["s", "n", "d", "t", "b", "ref", "recordName", "createdTimestamp"]), ascending: rng.chance(50))
        }
    }

    func searchableFields(_ db: Database) throws -> Set<String> {
        let type = try db.store.container(testContainer).schema(environment: .development).first { $0.name == "Thing" }
        return Set(type?.indexes.filter { $0.value.contains(.searchable) }.keys.map { $0 } ?? [])
    }

    /// What one phase's queries did: zone plans, how many used an index, and how many NEAR queries used the
    /// spatial index.
    struct Tally {
        var plans = 0
        var indexed = 0
        var spatial = 0
        /// Zone plans that read a composite index, and counts read off an index.
        var composite = 0
        var countedInIndex = 0
        /// Zone plans that visited a NEAR circle's cells nearest first (a sort by distance).
        var nearest = 0
        /// Queries ranked by BM25 (token searches without sorts).
        var ranked = 0
    }

    /// Makes a query's predicate and sorts (nil: ``predicate(_:depth:)`` or ``nearPredicate(_:)``, ``sorts(_:)``).
    typealias Queries = (inout SeededRandom) -> (Predicate, [QuerySort])

    /// The zones a query searches, and whether it is zone-wide.
    func scope(_ rng: inout SeededRandom) -> (zone: ZoneID, zoneWide: Bool) {
        let zoneWide = rng.chance(30)
        return (zoneWide ? .default : rng.pick([ZoneID.default, ZoneID(zoneName: "Z")]), zoneWide)
    }

    /// Runs `count` random queries and checks each against the brute-force answer: the pages concatenated, a marker
    /// on exactly the pages that leave matches, and the count.
    func check(
        _ db: Database, records: [Record], seed: UInt64, phase: String, count: Int, queries: Queries? = nil,
        _ rng: inout SeededRandom
    ) async throws -> Tally {
        var tally = Tally()
        for i in 0..<count {
            let p: Predicate
            let s: [QuerySort]
            if let queries {
                (p, s) = queries(&rng)
            } else {
                p = rng.chance(25) ? nearPredicate(&rng) : predicate(&rng)
                s = sorts(&rng)
            }
            let q = Query(recordType: "Thing", predicate: p, sortDescriptors: s)
            let (zone, zoneWide) = scope(&rng)
            let limit = rng.chance(3) ? 1 : rng.pick([9, 25, 60, 200])
            let context = "seed \(seed) \(phase) query \(i): \(p) sort \(s) zone \(zoneWide ? "*" : zone.zoneName) limit \(limit)"
            if let bad = Self.refused(p) {
                let e = await expectError(.invalidArguments) { try await db.query(q, zoneID: zone, zoneWide: zoneWide) }
                let message = e?.message ?? ""
                #expect(message.contains(bad.comparator.rawValue) && message.contains("'\(bad.field)'"), "\(context): \(message)")
                continue
            }
            var got: [Record] = []
            var cursor: QueryCursor?
            var pages: [(size: Int, marker: Bool)] = []
            repeat {
                let page = try await db.query(q, zoneID: zone, zoneWide: zoneWide, resultsLimit: limit, continuationMarker: cursor)
                got += page.records
                cursor = page.cursor
                pages.append((page.records.count, cursor != nil))
                tally.plans += page.plan.zones.count
                tally.indexed += page.plan.zones.filter(\.usesIndex).count
                tally.spatial += page.plan.zones.filter { $0.access.contains("spatial index") }.count
                tally.composite += page.plan.zones.filter { $0.access.contains("composite index") }.count
                tally.nearest += page.plan.zones.filter { $0.order.hasPrefix("spatial index cells in distance order") }.count
            } while cursor != nil && pages.count < 300
            // The brute force answer, with the fields the query itself may have made SEARCHABLE just in time.
            let searchable = try searchableFields(db)
            let corpus = records.filter { zoneWide || $0.id.zoneID.zoneName == zone.zoneName }
            // Without sorts a token search is ranked (BM25 over the zones' records), otherwise the model order.
            let ranking = modelRanking(p, sorts: s, searchable: searchable, corpus: corpus)
            let expected = corpus.filter { p.matches($0, searchable: searchable) }
                .sorted { a, b in ranking.map { rankedLess(a, b, $0) } ?? modelLess(a, b, s) }
            if ranking != nil { tally.ranked += 1 }
            #expect(got.map(\.id) == expected.map(\.id), "\(context)")
            // A marker on exactly the pages that leave matches, and those pages full.
            var seen = 0
            for (n, page) in pages.enumerated() {
                seen += page.size
                #expect(page.marker == (seen < expected.count), "marker after page \(n + 1) (\(seen) of \(expected.count)): \(context)")
                if page.marker { #expect(page.size == limit, "page \(n + 1) has a marker: \(context)") }
            }
            if i % 4 == 0 || queries != nil {
                let plan = try await db.explainCount(Query(recordType: "Thing", predicate: p), zoneID: zone, zoneWide: zoneWide)
                tally.countedInIndex += plan.zones.filter { $0.order.hasPrefix("counted in the index") }.count
                let n = try await db.count(Query(recordType: "Thing", predicate: p), zoneID: zone, zoneWide: zoneWide)
                #expect(n == expected.count, "count: \(context); planned: \(plan)")
            }
            if got.map(\.id) != expected.map(\.id) { break }
        }
        return tally
    }

    /// Runs `count` random queries, inserting and deleting records between their pages: the pages hold each record
    /// that matched and stayed throughout exactly once, in order, and nothing that never matched.
    func checkWhileChanging(
        _ db: Database, records: inout [String: Record], seed: UInt64, count: Int, queries: Queries? = nil,
        _ rng: inout SeededRandom
    ) async throws -> Int {
        var inserted = 0
        var ranked = 0
        for i in 0..<count {
            var p: Predicate
            let s: [QuerySort]
            if let queries {
                (p, s) = queries(&rng)
            } else {
                p = predicate(&rng)
                while Self.refused(p) != nil { p = predicate(&rng) }
                s = sorts(&rng)
            }
            let q = Query(recordType: "Thing", predicate: p, sortDescriptors: s)
            let (zone, zoneWide) = scope(&rng)
            let limit = rng.pick([4, 10, 25])
            let context = "seed \(seed) paging while changing, query \(i): \(p) sort \(s) zone \(zoneWide ? "*" : zone.zoneName) limit \(limit)"
            let before = records
            var deleted: Set<String> = []
            var added: [String: Record] = [:]
            var got: [Record] = []
            var cursor: QueryCursor?
            var pages = 0
            repeat {
                let page = try await db.query(q, zoneID: zone, zoneWide: zoneWide, resultsLimit: limit, continuationMarker: cursor)
                got += page.records
                cursor = page.cursor
                pages += 1
                // Between pages: delete up to 3 records and insert up to 3, anywhere in the order.
                var ops: [RecordOperation] = []
                let keys = records.keys.sorted()  // not the dictionary's order, which changes from run to run
                for _ in 0..<rng.int(4) where !keys.isEmpty {
                    let k = rng.pick(keys)
                    guard !deleted.contains(k) else { continue }
                    deleted.insert(k)
                    ops.append(.forceDelete(records[k]!.id))
                }
                for _ in 0..<rng.int(4) {
                    ops.append(.create(randomRecord("v\(inserted)", zone: rng.chance(50) ? .default : ZoneID(zoneName: "Z"), &rng)))
                    inserted += 1
                }
                for (op, result) in zip(ops, try await db.modify(ops)) {
                    let k = op.recordID.zoneID.zoneName + "/" + op.recordID.recordName
                    records[k] = result.record
                    if let r = result.record { added[k] = r }
                }
            } while cursor != nil && pages < 200
            #expect(cursor == nil, "paging did not end: \(context)")
            let searchable = try searchableFields(db)
            func matches(_ r: Record) -> Bool {
                (zoneWide || r.id.zoneID.zoneName == zone.zoneName) && p.matches(r, searchable: searchable)
            }
            let ids = got.map { $0.id.zoneID.zoneName + "/" + $0.recordName }
            #expect(Set(ids).count == ids.count, "a record came twice: \(context)")
            // A ranked query scores every page with the statistics of its first (its marker carries them): those of
            // the records before any change.
            let ranking = modelRanking(
                p, sorts: s, searchable: searchable, corpus: before.values.filter { zoneWide || $0.id.zoneID.zoneName == zone.zoneName })
            if ranking != nil { ranked += 1 }
            let inOrder = zip(got, got.dropFirst()).allSatisfy { a, b in ranking.map { rankedLess(a, b, $0) } ?? modelLess(a, b, s) }
            #expect(inOrder, "pages out of order: \(context)")
            let stayed = before.filter { !deleted.contains($0.key) && matches($0.value) }.keys
            let missing = Set(stayed).subtracting(ids)
            #expect(missing.isEmpty, "\(missing.count) records that matched throughout never came, e.g. \(missing.sorted().prefix(3)): \(context)")
            let foreign = ids.filter { k in !((before[k].map(matches) ?? false) || (added[k].map(matches) ?? false)) }
            #expect(foreign.isEmpty, "records that never matched: \(foreign.prefix(3)): \(context)")
            if !missing.isEmpty || !foreign.isEmpty || !inOrder { break }
        }
        return ranked
    }

    /// A store of two partitions whose database has zone `Z`, with 160 random records `t0…` in the default zone and
    /// 60 in `Z`; the records by "zone/name".
    func randomStore(_ dir: TempDir, _ rng: inout SeededRandom) async throws -> (CloudletStore, Database, [String: Record]) {
        let store = try await openStore(dir, partitions: 2)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        let z = ZoneID(zoneName: "Z")
        try await db.createZone(z)
        var records: [String: Record] = [:]
        var ops: [RecordOperation] = []
        for i in 0..<160 { ops.append(.create(randomRecord("t\(i)", zone: .default, &rng))) }
        for i in 0..<60 { ops.append(.create(randomRecord("t\(i)", zone: z, &rng))) }
        for chunk in stride(from: 0, to: ops.count, by: 100) {
            for r in try await db.modify(Array(ops[chunk..<min(chunk + 100, ops.count)])) {
                records[r.record!.id.zoneID.zoneName + "/" + r.record!.recordName] = r.record!
            }
        }
        return (store, db, records)
    }

    /// `store` closed once its index builds are done, and opened again from `dir` (its indexes as flushed), its builds
    /// done; with the test database.
    func reopened(_ store: CloudletStore, _ dir: TempDir) async throws -> (CloudletStore, Database) {
        await store.waitForIndexBuilds()
        try await store.close()
        let again = try await openStore(dir, partitions: 2)
        await again.waitForIndexBuilds()
        return (again, try again.container(testContainer).privateDatabase(user: "u"))
    }

    @Test(arguments: [11 as UInt64, 12])
    func queriesMatchABruteForceScan(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let dir = TempDir("query-property")
        var (store, db, records) = try await randomStore(dir, &rng)
        let z = ZoneID(zoneName: "Z")
        // Phase 1: every index is added just in time and held building, so every plan does without it.
        store.indexBuilder.pause()
        let building = try await check(db, records: Array(records.values), seed: seed, phase: "building", count: 30, &rng)
        #expect(building.spatial == 0)
        store.indexBuilder.resume()
        await store.waitForIndexBuilds()
        // Phase 2: the same kinds of queries with the indexes built.
        let built = try await check(db, records: Array(records.values), seed: seed, phase: "built", count: 35, &rng)
        #expect(built.indexed > built.plans / 6, "plans using an index once built: \(built.indexed) of \(built.plans)")
        // Phase 3: change the data under the indexes (updates, deletes, inserts), then query again.
        var ops: [RecordOperation] = []
        for (_, r) in records.sorted(by: { $0.key < $1.key }) where rng.chance(35) {
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
                records[op.recordID.zoneID.zoneName + "/" + op.recordID.recordName] = result.record
            }
        }
        let changed = try await check(db, records: Array(records.values), seed: seed, phase: "changed", count: 25, &rng)
        // Phase 4: records inserted and deleted between the pages of a query.
        let rankedWhileChanging = try await checkWhileChanging(db, records: &records, seed: seed, count: 8, &rng)
        // Phase 5: the store reopened, its indexes rebuilt from the checkpoint.
        (store, db) = try await reopened(store, dir)
        let reopened = try await check(db, records: Array(records.values), seed: seed, phase: "reopened", count: 25, &rng)
        #expect(reopened.indexed > reopened.plans / 6, "plans using an index after reopening: \(reopened.indexed) of \(reopened.plans)")
        #expect(built.spatial + changed.spatial + reopened.spatial > 0, "no NEAR query used the spatial index")
        #expect(building.ranked > 0 && built.ranked + changed.ranked + reopened.ranked > 0, "no token search was ranked")
        #expect(rankedWhileChanging > 0, "no ranked query was paged while records changed")
        try await store.close()
    }

    /// Pages sorted by distance that visit a NEAR circle's cells nearest first (``NearestWalk``): NEAR alone or ANDed
    /// with another predicate, sorted by the distance from its own centre or from another point, against the brute
    /// force answer — with the spatial index built, after the data changed, while records come and go between pages,
    /// and after the store reopened.
    @Test(arguments: [21 as UInt64, 22])
    func distanceSortedPagesVisitingCellsNearestFirstMatchABruteForceScan(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let dir = TempDir("query-property-nearest")
        var (store, db, records) = try await randomStore(dir, &rng)
        let queries: Queries = { rng in
            while true {
                let center = self.point(&rng)
                let near = Predicate.comparison(Comparison("loc", .near, .location(center), distance: self.radius(&rng)))
                let p = rng.chance(60) ? near : .and([near, self.predicate(&rng, depth: 1)])
                if Self.refused(p) == nil { return (p, [.distance("loc", from: rng.chance(60) ? center : self.point(&rng))]) }
            }
        }
        // The first query adds the spatial index just in time; then it is built.
        _ = try await check(db, records: Array(records.values), seed: seed, phase: "building", count: 1, queries: queries, &rng)
        await store.waitForIndexBuilds()
        let built = try await check(db, records: Array(records.values), seed: seed, phase: "built", count: 40, queries: queries, &rng)
        #expect(built.nearest > 20, "pages that visited cells nearest first: \(built.nearest) of \(built.plans)")
        _ = try await checkWhileChanging(db, records: &records, seed: seed, count: 15, queries: queries, &rng)
        (store, db) = try await reopened(store, dir)
        let reopened = try await check(db, records: Array(records.values), seed: seed, phase: "reopened", count: 30, queries: queries, &rng)
        #expect(reopened.nearest > 10, "after reopening: \(reopened.nearest) of \(reopened.plans)")
        try await store.close()
    }
}
