import CSQLite
import Cloudlet
import CloudletConcurrency
import CloudletCore
import Dispatch
import Foundation
import Synchronization

/// A loaded, indexed data set for the read workloads (`query-*`, `readrandom`), one per engine.
///
/// Both engines get the same `count` records from ``RecordGenerator`` as one record type `Item`, plus a
/// `category` field (the title's first word, 24 values), and equivalent single-field indexes:
///
/// | Field | Cloudlet (schema flags) | SQLite |
/// |---|---|---|
/// | `recordName` | the record ID (primary key) | `TEXT PRIMARY KEY` |
/// | `category` | QUERYABLE | `CREATE INDEX … (category)` |
/// | `count` | QUERYABLE SORTABLE | `CREATE INDEX … (count)` |
/// | `created` | SORTABLE | `CREATE INDEX … (created)` |
/// | `title` | SEARCHABLE | FTS5 external-content table over `title`; matches `ORDER BY rank` (FTS5's BM25), as Cloudlet ranks a token search without sorts |
/// | `place` (LOCATION, ``QueryFixtures/place(_:)``) | QUERYABLE SORTABLE (the spatial index; a sort by distance needs SORTABLE) | an R*Tree of the points (`rtree`) |
/// | `category`, `count` | `INDEX byCategoryCount (category, count DESC)` | `CREATE INDEX … (category, count DESC)` |
///
/// Loading is not timed and happens once per process per engine (the first `setUp` of any read workload); the
/// data lives next to the run directories and is closed and removed at exit. Every query materializes whole
/// rows (SQLite: every column read into Swift values; Cloudlet: `Record`s).
protocol QueryFixture: AnyObject, Sendable {
    /// `category = c ORDER BY created DESC LIMIT 100`; returns the rows read.
    func eqSort(_ category: String) throws -> Int
    /// `category = c ORDER BY count DESC LIMIT 100`, on the composite (category, count DESC) index.
    func eqSortComposite(_ category: String) throws -> Int
    /// `count >= lo AND count < hi ORDER BY count LIMIT 100`.
    func range(_ lo: Int64, _ hi: Int64) throws -> Int
    /// Titles containing all the words, `LIMIT 100`.
    func fullText(_ words: [String]) throws -> Int
    /// How many records have `count >= lo AND count < hi` (no rows read out).
    func count(_ lo: Int64, _ hi: Int64) throws -> Int
    /// The records whose `place` lies within `km` of `center`, nearest first, `LIMIT 100`.
    func near(_ center: Location, km: Double) throws -> Int
    /// The record named `name` (1 row).
    func lookup(_ name: String) throws -> Int
}

enum QueryFixtures {
    static let recordType = "Item"
    static let limit = 100

    private static let cache = Mutex<[String: (fixture: any QueryFixture, close: @Sendable () -> Void)]>([:])
    private static let registered = Mutex(false)

    /// The engines with a fixture.
    static let engines: Set<String> = ["cloudlet", "sqlite"]

    /// The fixture of `engine` with `count` records, loading it under `root` the first time.
    static func fixture(engine: String, count: Int, root: String) throws -> any QueryFixture {
        let key = "\(engine)-\(count)"
        if let f = cache.withLock({ $0[key]?.fixture }) { return f }
        let dir = root + "/query-data-" + key
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let records = RecordGenerator().records(count)
        Console.progress("loading \(count) records into \(engine) for the read workloads")
        let made: (any QueryFixture, @Sendable () -> Void)
        switch engine {
        case "cloudlet":
            let f = try CloudletQueryFixture(dir: dir, records: records)
            made = (f, { f.close(); removeData(dir, root: root) })
        case "sqlite":
            let f = try SQLiteQueryFixture(dir: dir, records: records)
            made = (f, { f.close(); removeData(dir, root: root) })
        default: throw BenchError(.engine, "no query fixture for engine '\(engine)'")
        }
        cache.withLock { $0[key] = made }
        registered.withLock { done in
            if !done { atexit { QueryFixtures.closeAll() } }
            done = true
        }
        return made.0
    }

    /// Removes the data, and the bench's temporary root if that leaves it empty (it was cleaned up while the
    /// data was still open).
    private static func removeData(_ dir: String, root: String) {
        try? FileManager.default.removeItem(atPath: dir)
        if (root as NSString).lastPathComponent.hasPrefix("cloudlet-bench.") { rmdir(root) }
    }

    static func closeAll() {
        let all = cache.withLock { c in
            defer { c = [:] }
            return Array(c.values)
        }
        for f in all { f.close() }
    }

    static func category(_ g: GeneratedRecord) -> String { String(g.title.split(separator: " ")[0]) }

    /// The region the records' places are spread over, uniformly: a degree of latitude by one of longitude (about
    /// 111 × 85 km, 9,400 km²) around New York.
    static let region = (latitude: 40.0...41.0, longitude: -74.5 ... -73.5)

    /// Record `i`'s place: a pseudo-random point of ``region`` (the same in every engine and run).
    static func place(_ i: Int) -> Location {
        var z = UInt64(i) &+ 0x9E37_79B9_7F4A_7C15
        func next() -> Double {
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            return Double(z >> 11) / Double(1 << 53)
        }
        let a = next(), b = next()
        return Location(
            latitude: region.latitude.lowerBound + a * (region.latitude.upperBound - region.latitude.lowerBound),
            longitude: region.longitude.lowerBound + b * (region.longitude.upperBound - region.longitude.lowerBound))
    }

    /// The radius in km of a circle holding about `matches` of `records` places (ten pages of 100 at the default):
    /// 5.5 km at 100 k records, 1.7 km at 1 M.
    static func nearRadius(records: Int, matches: Int = 1_000) -> Double {
        let area = 111.2 * 111.2 * cos(40.5 * Double.pi / 180)  // km² of the region
        return (Double(matches) / Double(max(records, 1)) * area / Double.pi).squareRoot()
    }

    /// The `i`th query's centre: a pseudo-random point of the region's middle half, so that its circle lies inside.
    static func nearCenter(_ i: Int) -> Location {
        let p = place(1_000_003 &* (i + 1))
        return Location(latitude: 40.25 + (p.latitude - 40.0) / 2, longitude: -74.25 + (p.longitude + 74.5) / 2)
    }
    /// The 24 title words, in order.
    static let words = [
        "alpha", "bravo", "cloud", "delta", "echo", "field", "grove", "harbor", "island", "jade", "kite", "lumen",
        "meadow", "north", "orbit", "prism", "quartz", "river", "summit", "tundra", "umber", "vivid", "willow", "zephyr",
    ]
}

// MARK: - Cloudlet

final class CloudletQueryFixture: QueryFixture {
    private let store: CloudletStore
    private let db: Database
    private let zone = ZoneID(zoneName: "Bench")

    init(dir: String, records: [GeneratedRecord]) throws {
        let zone = self.zone
        (store, db) = try ThreadBridge.wait {
            let store = try await CloudletStore.open(at: dir + "/cloudlet", configuration: StoreConfiguration(durability: .os))
            let container = try store.container("iCloud.com.example.bench")
            try await container.importSchema(
                """
                DEFINE SCHEMA
                RECORD TYPE \(QueryFixtures.recordType) (
                    category STRING QUERYABLE, title STRING SEARCHABLE, count INT64 QUERYABLE SORTABLE,
                    score DOUBLE, created TIMESTAMP SORTABLE, tags LIST<STRING>, payload BYTES, place LOCATION QUERYABLE SORTABLE,
                    INDEX byCategoryCount (category, count DESC)
                );
                """)
            let db = try container.privateDatabase(user: "bench")
            try await db.createZone(zone)
            return (store, db)
        }
        let db = self.db
        for start in stride(from: 0, to: records.count, by: 200) {
            let ops = records[start..<min(start + 200, records.count)].enumerated().map { k, g in
                RecordOperation.create(
                    Record(
                        recordType: QueryFixtures.recordType, recordName: g.recordName, zoneID: zone,
                        fields: [
                            "category": .string(QueryFixtures.category(g)), "title": .string(g.title),
                            "count": .int64(g.count), "score": .double(g.score), "created": .timestamp(g.created),
                            "tags": .list(.string, g.tags.map { .string($0) }), "payload": .bytes(g.payload),
                            "place": .location(QueryFixtures.place(start + k)),
                        ]))
            }
            let results = try ThreadBridge.wait { try await db.modify(ops, atomic: true) }
            if let failure = results.first(where: { $0.error != nil }) { throw failure.error! }
        }
        // Every query must use its index: wait for any still being built.
        let nearCheck = nearQuery(QueryFixtures.nearCenter(0), km: 1)
        for q in [eqSortQuery("alpha"), eqSortCompositeQuery("alpha"), rangeQuery(0, 1), textQuery(["alpha"]), nearCheck] {
            var tries = 0
            while true {
                let plan = try ThreadBridge.wait { try await db.explain(q, zoneID: zone) }
                if plan.zones.allSatisfy(\.usesIndex) && plan.notes.isEmpty {
                    if ProcessInfo.processInfo.environment["CLOUDLET_BENCH_EXPLAIN"] != nil { Console.error("\(q): \(plan)") }
                    break
                }
                tries += 1
                if tries > 600 { throw BenchError(.engine, "Cloudlet: the index is not ready: \(plan)") }
                usleep(50_000)
            }
        }
    }

    private func eqSortQuery(_ c: String) -> Query {
        Query(
            recordType: QueryFixtures.recordType, predicate: .comparison(Comparison("category", .equals, .string(c))),
            sortDescriptors: [.descending("created")])
    }

    private func eqSortCompositeQuery(_ c: String) -> Query {
        Query(
            recordType: QueryFixtures.recordType, predicate: .comparison(Comparison("category", .equals, .string(c))),
            sortDescriptors: [.descending("count")])
    }

    private func rangeQuery(_ lo: Int64, _ hi: Int64) -> Query {
        Query(
            recordType: QueryFixtures.recordType,
            predicate: .and([
                .comparison(Comparison("count", .greaterThanOrEquals, .int64(lo))),
                .comparison(Comparison("count", .lessThan, .int64(hi))),
            ]),
            sortDescriptors: [.ascending("count")])
    }

    private func textQuery(_ words: [String]) -> Query {
        Query(
            recordType: QueryFixtures.recordType,
            predicate: .comparison(Comparison("title", .containsAllTokens, .string(words.joined(separator: " ")))))
    }

    private func nearQuery(_ center: Location, km: Double) -> Query {
        Query(
            recordType: QueryFixtures.recordType,
            predicate: .comparison(Comparison("place", .near, .location(center), distance: km)),
            sortDescriptors: [.distance("place", from: center)])
    }

    private func run(_ q: Query) throws -> Int {
        let db = self.db, zone = self.zone
        return try ThreadBridge.wait { try await db.query(q, zoneID: zone, resultsLimit: QueryFixtures.limit).records.count }
    }

    func eqSort(_ category: String) throws -> Int { try run(eqSortQuery(category)) }
    func eqSortComposite(_ category: String) throws -> Int { try run(eqSortCompositeQuery(category)) }
    func range(_ lo: Int64, _ hi: Int64) throws -> Int { try run(rangeQuery(lo, hi)) }
    func fullText(_ words: [String]) throws -> Int { try run(textQuery(words)) }
    func near(_ center: Location, km: Double) throws -> Int { try run(nearQuery(center, km: km)) }
    func count(_ lo: Int64, _ hi: Int64) throws -> Int {
        let db = self.db, zone = self.zone, q = rangeQuery(lo, hi)
        return try ThreadBridge.wait { try await db.count(Query(recordType: q.recordType, predicate: q.predicate), zoneID: zone) }
    }
    func lookup(_ name: String) throws -> Int {
        let db = self.db, id = RecordID(recordName: name, zoneID: zone)
        return try ThreadBridge.wait { try await db.record(for: id) }.fields.count > 0 ? 1 : 0
    }

    func close() {
        let store = self.store
        _ = try? ThreadBridge.wait { try await store.close() }
    }

    /// The participant the zone is shared with (`query-shared`), and their shared database once it is.
    static let participant = "reader"
    private let shared = Mutex<Database?>(nil)

    /// `eqSort` in the zone shared whole (READ_ONLY) with ``participant``: run by them through their shared database, or
    /// by the owner through hers. The zone is shared (and accepted) the first time, not timed.
    func sharedEqSort(_ category: String, asParticipant: Bool) throws -> Int {
        let reader = try shared.withLock { db -> Database in
            if let db { return db }
            let owner = self.db, store = self.store, zone = self.zone
            let made = try ThreadBridge.wait {
                let share = try await owner.saveShare(
                    Share(zone: zone, participants: [Share.Participant(userRecordName: Self.participant, permission: .readOnly)]))
                let container = try store.container("iCloud.com.example.bench")
                try await container.publicDatabase(user: Self.participant).acceptShare(shortGUID: share.shortGUID!)
                return try container.sharedDatabase(user: Self.participant)
            }
            db = made
            return made
        }
        guard asParticipant else { return try run(eqSortQuery(category)) }
        let q = eqSortQuery(category), zone = ZoneID(zoneName: self.zone.zoneName, ownerName: db.id.owner)
        return try ThreadBridge.wait { try await reader.query(q, zoneID: zone, resultsLimit: QueryFixtures.limit).records.count }
    }
}

// MARK: - SQLite

/// `@unchecked Sendable`: one connection, used by one workload thread at a time (the runner is sequential).
final class SQLiteQueryFixture: QueryFixture, @unchecked Sendable {
    private var db: OpaquePointer?
    private var statements: [OpaquePointer?] = []
    private var eq: OpaquePointer?
    private var eqComposite: OpaquePointer?
    private var rng: OpaquePointer?
    private var fts: OpaquePointer?
    private var get: OpaquePointer?
    private var cnt: OpaquePointer?
    private var box: OpaquePointer?
    private var byRowid: OpaquePointer?

    static let columns = "r.recordName, r.recordType, r.title, r.count, r.score, r.created, r.tags, r.payload"

    init(dir: String, records: [GeneratedRecord]) throws {
        guard sqlite3_open_v2(dir + "/query.sqlite", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
            == SQLITE_OK
        else { throw BenchError(.engine, "sqlite3_open_v2: \(message)") }
        try exec("PRAGMA journal_mode=WAL")
        try exec(
            """
            CREATE TABLE records(recordName TEXT PRIMARY KEY, recordType TEXT, category TEXT, title TEXT,
                count INTEGER, score REAL, created INTEGER, tags TEXT, payload BLOB)
            """)
        try exec("CREATE INDEX records_category ON records(category)")
        try exec("CREATE INDEX records_count ON records(count)")
        try exec("CREATE INDEX records_created ON records(created)")
        try exec("CREATE INDEX records_category_count ON records(category, count DESC)")
        do {
            try exec("CREATE VIRTUAL TABLE titles USING fts5(title, content='records', content_rowid='rowid')")
        } catch {
            throw BenchError(.engine, "this SQLite has no FTS5 (query-fulltext needs it): \(error)")
        }
        do {
            try exec("CREATE VIRTUAL TABLE places USING rtree(id, minLat, maxLat, minLon, maxLon)")
        } catch {
            throw BenchError(.engine, "this SQLite has no R*Tree module (query-near needs it): \(error)")
        }
        let place = try prepare("INSERT INTO places(id, minLat, maxLat, minLon, maxLon) VALUES (?1, ?2, ?2, ?3, ?3)")
        let insert = try prepare(
            "INSERT INTO records(recordName, recordType, category, title, count, score, created, tags, payload) "
                + "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")
        try exec("BEGIN")
        let transient = csqlite_transient()
        for (i, r) in records.enumerated() {
            sqlite3_bind_text(insert, 1, r.recordName, -1, transient)
            sqlite3_bind_text(insert, 2, QueryFixtures.recordType, -1, transient)
            sqlite3_bind_text(insert, 3, QueryFixtures.category(r), -1, transient)
            sqlite3_bind_text(insert, 4, r.title, -1, transient)
            sqlite3_bind_int64(insert, 5, r.count)
            sqlite3_bind_double(insert, 6, r.score)
            sqlite3_bind_int64(insert, 7, r.created)
            sqlite3_bind_text(insert, 8, r.tags.joined(separator: ","), -1, transient)
            r.payload.withUnsafeBytes { _ = sqlite3_bind_blob(insert, 9, $0.baseAddress, Int32($0.count), transient) }
            guard sqlite3_step(insert) == SQLITE_DONE else { throw BenchError(.engine, "insert: \(message)") }
            sqlite3_reset(insert)
            let p = QueryFixtures.place(i)
            sqlite3_bind_int64(place, 1, sqlite3_last_insert_rowid(db))
            sqlite3_bind_double(place, 2, p.latitude)
            sqlite3_bind_double(place, 3, p.longitude)
            guard sqlite3_step(place) == SQLITE_DONE else { throw BenchError(.engine, "insert into places: \(message)") }
            sqlite3_reset(place)
        }
        try exec("INSERT INTO titles(rowid, title) SELECT rowid, title FROM records")
        try exec("COMMIT")
        try exec("ANALYZE")
        let c = Self.columns
        eq = try prepare("SELECT \(c) FROM records r WHERE category = ?1 ORDER BY created DESC LIMIT \(QueryFixtures.limit)")
        eqComposite = try prepare(
            "SELECT \(c) FROM records r WHERE category = ?1 ORDER BY count DESC LIMIT \(QueryFixtures.limit)")
        rng = try prepare(
            "SELECT \(c) FROM records r WHERE count >= ?1 AND count < ?2 ORDER BY count LIMIT \(QueryFixtures.limit)")
        fts = try prepare(
            "SELECT \(c) FROM titles JOIN records r ON r.rowid = titles.rowid WHERE titles MATCH ?1 ORDER BY rank LIMIT \(QueryFixtures.limit)")
        get = try prepare("SELECT \(c) FROM records r WHERE recordName = ?1")
        cnt = try prepare("SELECT COUNT(*) FROM records WHERE count >= ?1 AND count < ?2")
        box = try prepare("SELECT id, minLat, minLon FROM places WHERE minLat >= ?1 AND maxLat <= ?2 AND minLon >= ?3 AND maxLon <= ?4")
        byRowid = try prepare("SELECT \(c) FROM records r WHERE rowid = ?1")
    }

    private var message: String { db.map { String(cString: sqlite3_errmsg($0)) } ?? "no connection" }

    private func exec(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw BenchError(.engine, "\(sql): \(message)") }
    }

    private func prepare(_ sql: String) throws -> OpaquePointer? {
        var s: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &s, nil) == SQLITE_OK else {
            throw BenchError(.engine, "prepare \(sql): \(message)")
        }
        statements.append(s)
        return s
    }

    /// Steps `s` to the end, reading every column of every row into Swift values; resets it.
    private func rows(_ s: OpaquePointer?) throws -> Int {
        defer {
            sqlite3_reset(s)
            sqlite3_clear_bindings(s)
        }
        var n = 0
        var sink = 0
        while true {
            let rc = sqlite3_step(s)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw BenchError(.engine, "query: \(message)") }
            for i: Int32 in [0, 1, 2, 6] { sink &+= String(cString: sqlite3_column_text(s, i)).utf8.count }
            sink &+= Int(sqlite3_column_int64(s, 3)) &+ Int(sqlite3_column_double(s, 4)) &+ Int(sqlite3_column_int64(s, 5))
            let bytes = Int(sqlite3_column_bytes(s, 7))
            if let p = sqlite3_column_blob(s, 7) {
                sink &+= Array(UnsafeRawBufferPointer(start: p, count: bytes)).count
            }
            n += 1
        }
        return sink == -1 ? 0 : n
    }

    func eqSort(_ category: String) throws -> Int {
        sqlite3_bind_text(eq, 1, category, -1, csqlite_transient())
        return try rows(eq)
    }

    func eqSortComposite(_ category: String) throws -> Int {
        sqlite3_bind_text(eqComposite, 1, category, -1, csqlite_transient())
        return try rows(eqComposite)
    }

    func range(_ lo: Int64, _ hi: Int64) throws -> Int {
        sqlite3_bind_int64(rng, 1, lo)
        sqlite3_bind_int64(rng, 2, hi)
        return try rows(rng)
    }

    func fullText(_ words: [String]) throws -> Int {
        sqlite3_bind_text(fts, 1, words.joined(separator: " "), -1, csqlite_transient())
        return try rows(fts)
    }

    func count(_ lo: Int64, _ hi: Int64) throws -> Int {
        defer { sqlite3_reset(cnt) }
        sqlite3_bind_int64(cnt, 1, lo)
        sqlite3_bind_int64(cnt, 2, hi)
        guard sqlite3_step(cnt) == SQLITE_ROW else { throw BenchError(.engine, "count: \(message)") }
        return Int(sqlite3_column_int64(cnt, 0))
    }

    func lookup(_ name: String) throws -> Int {
        sqlite3_bind_text(get, 1, name, -1, csqlite_transient())
        return try rows(get)
    }

    /// The R*Tree's points in the circle's bounding box, their distances computed here (haversine, as Cloudlet's
    /// NEAR), those within `km` sorted nearest first; then the first 100 rows read by rowid.
    func near(_ center: Location, km: Double) throws -> Int {
        let dLat = km / Geo.earthRadiusKm * 180 / Double.pi
        let dLon = dLat / cos(center.latitude * Double.pi / 180)
        sqlite3_bind_double(box, 1, center.latitude - dLat)
        sqlite3_bind_double(box, 2, center.latitude + dLat)
        sqlite3_bind_double(box, 3, center.longitude - dLon)
        sqlite3_bind_double(box, 4, center.longitude + dLon)
        var hits: [(km: Double, rowid: Int64)] = []
        while true {
            let rc = sqlite3_step(box)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw BenchError(.engine, "near: \(message)") }
            let d = Geo.distanceKilometres(
                Location(latitude: sqlite3_column_double(box, 1), longitude: sqlite3_column_double(box, 2)), center)
            if d <= km { hits.append((d, sqlite3_column_int64(box, 0))) }
        }
        sqlite3_reset(box)
        hits.sort { $0.km < $1.km }
        var n = 0
        for h in hits.prefix(QueryFixtures.limit) {
            sqlite3_bind_int64(byRowid, 1, h.rowid)
            n += try rows(byRowid)
        }
        return n
    }

    func close() {
        for s in statements { sqlite3_finalize(s) }
        statements = []
        sqlite3_close_v2(db)
        db = nil
    }
}
