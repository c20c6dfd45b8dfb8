import CloudletMaintenance
import CloudletConcurrency
import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable @_spi(Maintenance) import Cloudlet

/// The catalog's own log and state (Sources/Cloudlet/Catalog): just-in-time schema additions are committed and
/// made durable on the catalog before a data partition's lock is taken, data commits record the catalog version
/// they were validated against, and the catalog survives reopening.
@Suite struct CatalogTests {
    /// A zone of `db` that lives in a partition other than 0.
    static func zoneOutsidePartitionZero(_ store: CloudletStore, _ db: Database) throws -> (ZoneID, ZoneKey, Partition) {
        for i in 0..<64 {
            let zone = ZoneID(zoneName: "Z\(i)")
            let key = try db.key(zone)
            let p = store.partition(for: key)
            if p.id != 0 { return (zone, key, p) }
        }
        throw CloudletError(.internalError, "no zone outside partition 0")
    }

    /// The catalog versions recorded in the data commit that wrote record `name` (its frame, read back).
    static func recordedCatalogVersions(_ p: Partition, _ key: ZoneKey, _ name: String) throws -> [UInt64] {
        let entry = try #require(try p.state.withLock { try $0.entry(key, name) })
        let frame = try p.log.readFrame(at: entry.position)
        let (commit, _, _) = try Commit.decode(frame.payload)
        return commit.mutations.compactMap { if case .catalogVersion(let v) = $0 { v } else { nil } }
    }

    /// Polls `condition` (on the cooperative pool: it must not block) for up to 10 s.
    static func eventually(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(10)
        while !condition() {
            guard Date() < deadline else { throw CloudletError(.internalError, "timed out waiting until \(what)") }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    @Test func aFieldAddedByAWriteToAnotherPartitionIsDurableInTheCatalogBeforeThatPartitionsLockIsTaken() async throws {
        let dir = TempDir("catalog-order")
        let fs = FaultInjectingFileSystem(wrapping: PosixFileSystem())
        var config = StoreConfiguration(durability: .fsync)
        config.partitions = 4
        let fixed = config
        let store = try await ThreadBridge.offload { try CloudletStore(path: dir.sub("store"), configuration: fixed, fileSystem: fs) }
        let db = try store.container(testContainer).privateDatabase(user: "u")
        let (zone, key, p) = try Self.zoneOutsidePartitionZero(store, db)
        try await db.createZone(zone)
        _ = try await db.save(Record(recordType: "Item", recordName: "first", zoneID: zone, fields: ["a": .int64(1)]))
        let catalogLog = try #require(store.catalog.log)
        let catalogBefore = store.catalog.snapshot().version
        let partitionBefore = p.log.lastLSN

        // Every fdatasync now waits: the catalog commit of the new field cannot become durable.
        fs.stallFdatasync()
        let jit = Task {
            try await db.save(Record(recordType: "Item", recordName: "jit", zoneID: zone, fields: ["a": .int64(2), "b": .string("new")]))
        }
        try await Self.eventually("the field is staged in the catalog") { catalogLog.lastLSN > catalogBefore }
        #expect(catalogLog.durableLSN == catalogBefore, "the catalog commit is not durable yet")
        #expect(store.catalog.snapshot().schema.recordType(SchemaKey(zone: key), "Item")?.fields["b"] == nil)
        // The writer waits for the catalog outside partition p's lock: the lock is free, another writer of the
        // same zone (known fields) stages its commit, and the JIT record is not in the partition.
        #expect(try p.state.withLock { try $0.entry(key, "jit") } == nil)
        let other = Task {
            try await db.save(Record(recordType: "Item", recordName: "other", zoneID: zone, fields: ["a": .int64(3)]))
        }
        try await Self.eventually("the other writer stages its commit") { p.log.lastLSN > partitionBefore }
        #expect(try p.state.withLock { try $0.entry(key, "jit") } == nil, "no data commit before the catalog's is durable")
        #expect(catalogLog.durableLSN == catalogBefore)

        fs.resumeFdatasync()
        let saved = try await jit.value
        _ = try await other.value
        #expect(saved["b"] == .string("new"))
        // The data commit came after the catalog commit was durable, and says which catalog version it used.
        let fieldVersion = catalogBefore + 1
        let recorded = try Self.recordedCatalogVersions(p, key, "jit")
        #expect(recorded.count == 1 && recorded[0] >= fieldVersion, "\(recorded)")
        #expect(p.state.withLock { $0.catalogVersion } >= fieldVersion)
        #expect(store.catalog.snapshot().schema.recordType(SchemaKey(zone: key), "Item")?.fields["b"] == FieldType(.string))
        // A commit validated against a catalog version the partition already recorded records nothing.
        _ = try await db.save(Record(recordType: "Item", recordName: "later", zoneID: zone, fields: ["a": .int64(4)]))
        #expect(try Self.recordedCatalogVersions(p, key, "later").isEmpty)
        try await store.close()
    }

    @Test func concurrentJustInTimeAdditionsFromManyPartitionsConvergeToOneSchema() async throws {
        let dir = TempDir("catalog-converge")
        let store = try await openStore(dir, partitions: 8)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        let zones = (0..<12).map { ZoneID(zoneName: "Z\($0)") }
        for z in zones { try await db.createZone(z) }
        // 24 writers, each saving 10 records whose fields overlap with other writers' (so the same field is wanted
        // by several partitions at once), and two writers racing to give 'clash' different types.
        let results = try await withThrowingTaskGroup(of: [(String, Result<Record, CloudletError>)].self) { group in
            for w in 0..<24 {
                group.addTask {
                    var out: [(String, Result<Record, CloudletError>)] = []
                    for i in 0..<10 {
                        let zone = zones[(w + i) % zones.count]
                        var r = Record(recordType: "Shared", recordName: "w\(w)-\(i)", zoneID: zone)
                        r["f\((w * 7 + i) % 40)"] = .int64(Int64(i))
                        r["g\(w % 5)"] = .string("w\(w)")
                        if i == 0 && w < 2 { r["clash"] = w == 0 ? .int64(1) : .string("one") }
                        do { out.append((r.recordName, .success(try await db.save(r)))) } catch let e as CloudletError {
                            out.append((r.recordName, .failure(e)))
                        }
                    }
                    return out
                }
            }
            var all: [(String, Result<Record, CloudletError>)] = []
            for try await r in group { all += r }
            return all
        }
        let failures = results.compactMap { name, r -> (String, CloudletError)? in
            if case .failure(let e) = r { (name, e) } else { nil }
        }
        // Exactly one of the two 'clash' records lost, and it was told why.
        #expect(failures.count == 1, "\(failures)")
        #expect(failures.allSatisfy { ["w0-0", "w1-0"].contains($0.0) && $0.1.code == .invalidArguments && $0.1.message.contains("clash") })

        let key = SchemaKey(container: testContainer, environment: .development)
        let schema = try #require(store.catalog.snapshot().schema.recordType(key, "Shared"))
        let expected = Set((0..<40).map { "f\($0)" } + (0..<5).map { "g\($0)" } + ["clash"])
        #expect(Set(schema.fields.keys) == expected)
        // Every saved record's fields are in the schema with its types.
        for case (_, .success(let r)) in results {
            for (f, v) in r.fields { #expect(schema.fields[f] == v.type, "\(r.recordName).\(f)") }
        }
        // Each field was added to the catalog once, however many writers wanted it.
        try await store.close()
        var added: [String: Int] = [:]
        let walk = try LogWalker(directory: dir.sub("store") + "/" + Catalog.directoryName).walk(progress: nil) { frame in
            let commit = try Catalog.decode(frame.type, try frame.payload(), lsn: frame.lsn, at: "test")
            for case .schemaField(_, "Shared", let field?, _) in commit.mutations { added[field, default: 0] += 1 }
        }
        #expect(walk.isClean)
        #expect(added.filter { $0.value != 1 }.isEmpty, "\(added.filter { $0.value != 1 })")
        #expect(Set(added.keys) == expected)

        let reopened = try await openStore(dir)
        let again = try #require(reopened.catalog.snapshot().schema.recordType(key, "Shared"))
        #expect(again == schema)
        let version = reopened.catalog.snapshot().version
        for p in reopened.partitions { #expect(p.state.withLock { $0.catalogVersion } <= version) }
        try await reopened.close()
    }

    @Test func theCatalogSurvivesReopenWithAndWithoutItsCheckpoint() async throws {
        let dir = TempDir("catalog-reopen")
        var store = try await openStore(dir, partitions: 3)
        let container = try store.container(testContainer)
        let db = try container.privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "Notes")
        try await db.createZone(zone)
        for i in 0..<30 {
            _ = try await db.save(note("n\(i)", zone: i % 2 == 0 ? zone : .default, title: "t\(i % 3)", count: Int64(i)))
        }
        try await container.addIndexes(.queryable, recordType: "Note", field: "title")
        try await db.saveSubscription(Subscription(id: "notes", kind: .zone(zone)))
        try await db.saveSubscription(Subscription(id: "gone", kind: .database))
        try await db.deleteSubscription("gone")
        _ = try await container.deploySchema()
        let schema = container.schema(environment: .development)
        let production = container.schema(environment: .production)
        let version = store.catalog.snapshot().version
        #expect(version >= 5)
        // Built before closing: a build a close stops starts again at the next open, and a query right after it
        // would race it (and scan).
        await store.waitForIndexBuilds()
        try await store.close()

        func check(_ store: CloudletStore) async throws {
            let c = try store.container(testContainer)
            #expect(c.schema(environment: .development) == schema)
            #expect(c.schema(environment: .production) == production)
            #expect(try await c.privateDatabase(user: "alice").subscriptions().map(\.id) == ["notes"])
            #expect(store.catalog.snapshot().version == version)
            let page = try await c.privateDatabase(user: "alice").query(try Query(recordType: "Note", format: "title == 't1'"), zoneID: zone)
            #expect(page.plan.zones[0].usesIndex)
            #expect(page.records.count == 5)
        }
        store = try await openStore(dir)
        #expect(store.catalog.framesReplayed == 0 && store.catalog.checkpointLSN == version, "a clean close checkpoints the catalog")
        try await check(store)
        try await store.close()

        // Without checkpoints the catalog's log is replayed from the start.
        let catalogDir = dir.sub("store") + "/" + Catalog.directoryName
        for f in try FileManager.default.contentsOfDirectory(atPath: catalogDir) where f.hasSuffix(".ckpt") {
            try FileManager.default.removeItem(atPath: catalogDir + "/" + f)
        }
        store = try await openStore(dir)
        #expect(store.catalog.framesReplayed == Int(version) && store.catalog.checkpointLSN == nil)
        try await check(store)
        try await store.close()
    }

    @Test func aPartitionAheadOfItsCatalogIsRefusedAndVerifyNamesIt() async throws {
        let dir = TempDir("catalog-lost")
        let store = try await openStore(dir, partitions: 2)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        _ = try await db.save(note("n1"))
        let used = store.partitions.map { p in p.state.withLock { $0.catalogVersion } }.max() ?? 0
        #expect(used >= 1)
        try await store.close()
        // The catalog loses everything (an operator deleted its directory): the data names versions it lacks.
        try FileManager.default.removeItem(atPath: dir.sub("store") + "/" + Catalog.directoryName)
        try FileManager.default.createDirectory(atPath: dir.sub("store") + "/" + Catalog.directoryName, withIntermediateDirectories: false)
        let report = try StoreInspector(path: dir.sub("store")).verify(deep: false)
        #expect(!report.isClean)
        #expect(report.findings.contains { $0.partition == VerifyReport.catalogPartition && $0.message.contains("catalog version \(used)") }, "\(report.findings)")
        let e = await expectError(.corruption) { try await openStore(dir) }
        #expect(e?.message.contains("validated against catalog version \(used)") == true, "\(String(describing: e))")
        // The failed open released the store's lock and files: a second open fails the same way, not as `locked`.
        await expectError(.corruption) { try await openStore(dir) }
    }

    @Test func toolsShowAndCheckTheCatalog() async throws {
        let dir = TempDir("catalog-tools")
        let path = dir.sub("store")
        var config = toolStoreConfig()
        config.partitions = 2
        let store = try await CloudletStore.open(at: path, configuration: config)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        _ = try await db.save(note("n1"))
        try await db.saveSubscription(Subscription(id: "all", kind: .database))
        let version = store.catalog.snapshot().version
        try await store.close()

        let info = try await tool("info", "--data", path)
        #expect(info.code == 0 && info.stdout.contains("catalog (catalog/): version \(version)"), "\(info)")
        #expect(info.stdout.contains("1 record type(s) in 1 schema(s), 2 field(s)") && info.stdout.contains("1 subscription(s)"), "\(info)")
        let ij = try await tool("info", "--data", path, "--json").json()
        #expect(ij["catalog"]?["version"]?.int64Value == Int64(version))
        let verify = try await tool("verify", "--data", path, "--deep")
        #expect(verify.code == 0 && verify.stdout.contains("+ catalog (version \(version)"), "\(verify)")
        let entries = try await tool("dump", "--data", path, "--catalog", "--json").jsonLines()
        #expect(entries.map { $0["kind"]?.stringValue } == ["record-type", "subscription"], "\(entries)")
        #expect(entries[0]["fields"]?["title"]?.stringValue == "STRING")
        let log = try await tool("dump", "--data", path, "--catalog", "--log")
        #expect(log.code == 0 && log.lines.first?.hasPrefix("catalog LSN 1.0") == true && log.stdout.contains("subscription"), "\(log)")
        let hash = try await tool("hash", "--data", path, "--json").json()
        #expect(hash["catalog"]?.stringValue?.count == 64)

        // A flipped byte in the catalog's segment is an error naming the catalog and the segment.
        let segment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: path + "/catalog").first { $0.hasSuffix(".seg") })
        try xorByte(path + "/catalog/" + segment, at: 48 + 40)
        for f in try FileManager.default.contentsOfDirectory(atPath: path + "/catalog") where f.hasSuffix(".ckpt") {
            try FileManager.default.removeItem(atPath: path + "/catalog/" + f)
        }
        let bad = try await tool("verify", "--data", path)
        #expect(bad.code == 65 && bad.stdout.contains("error: catalog, segment \(segment), offset 48"), "\(bad)")
    }
}
