import CloudletMaintenance
import CloudletConcurrency
import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable @_spi(Maintenance) import Cloudlet

/// A format-1 store, written in the test the way the code before the catalog wrote one: `CLOUDLET` says format 1
/// and partition 0's log holds the schema (types, fields, index flags) and the subscriptions next to its data —
/// mutation kinds 5, 8/1, 20 and 21, which the commit codec still writes and reads.
struct Format1Store {
    let path: String
    let database = DatabaseID(container: testContainer, environment: .development, scope: .private, owner: "alice")
    /// A custom zone in partition 0 and one in partition 1 (of 2).
    let zone0: ZoneKey
    let zone1: ZoneKey
    let who: SubscriberID
    /// The schema partition 0's log holds.
    let schema: SchemaCatalog

    static let dev = SchemaKey(container: testContainer, environment: .development)
    static let prod = SchemaKey(container: testContainer, environment: .production)

    init(at path: String) throws {
        self.path = path
        // Owner-only, as a store's directory is made (verify would warn about anything looser).
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try StoreMetadata(format: 1, storeID: UUID().uuidString.lowercased(), partitions: 2, created: 1_700_000_000_000)
            .save(directory: path)
        let db = database
        func zone(in partition: UInt64) -> ZoneKey {
            (0...).lazy.map { ZoneKey(database: db, zoneName: "Z\($0)") }.first { $0.stableHash % 2 == partition }!
        }
        zone0 = zone(in: 0)
        zone1 = zone(in: 1)
        who = SubscriberID(database: database, user: "alice")

        let schemaMutations: [Mutation] = [
            .schemaField(Self.dev, recordType: "Note", field: nil, type: nil),
            .schemaField(Self.dev, recordType: "Note", field: "count", type: FieldType(.int64)),
            .schemaField(Self.dev, recordType: "Note", field: "title", type: FieldType(.string)),
        ]
        let flags = Mutation.index(.flags(Self.dev, recordType: "Note", field: "title", .queryable))
        let production: [Mutation] = [
            .schemaField(Self.prod, recordType: "Note", field: nil, type: nil),
            .schemaField(Self.prod, recordType: "Note", field: "title", type: FieldType(.string)),
        ]
        var schema = SchemaCatalog()
        for m in schemaMutations + [flags] + production { schema.apply(m) }
        self.schema = schema
        let defines = IndexReconciler.mutations(schema: schema, indexes: IndexState())

        func note(_ name: String, _ zone: ZoneKey, lsn: UInt64, index: Int) -> Mutation {
            var r = Record(recordType: "Note", recordName: name, zoneID: zone.zoneID, fields: ["title": .string("x"), "count": .int64(1)])
            r.changeTag = ChangeTag.make(lsn: lsn, index: index)
            r.created = RecordStamp(timestamp: 1_700_000_000_000, userRecordName: "alice", deviceID: "old")
            r.modified = r.created
            return .putRecord(zone: zone, record: r, encoded: RecordCodec.encode(r))
        }
        try Self.writeLog(
            path + "/p0000", partition: 0,
            [
                schemaMutations + [.createZone(zone0), note("n1", zone0, lsn: 1, index: 4)],
                [flags] + defines,
                [
                    .saveSubscription(who, Subscription(id: "a", kind: .zone(zone0.zoneID))),
                    .saveSubscription(who, Subscription(id: "b", kind: .database)),
                ],
                [.deleteSubscription(who, id: "b")],
                production,
            ])
        try Self.writeLog(path + "/p0001", partition: 1, [[.createZone(zone1)], defines, [note("n2", zone1, lsn: 3, index: 0)]])
    }

    /// Writes `commits` as the frames of a partition's log.
    static func writeLog(_ directory: String, partition: UInt32, _ commits: [[Mutation]]) throws {
        var config = LogConfiguration()
        config.durability = .os
        let log = try Log.open(directory: directory, partition: partition, configuration: config) { _ in }
        for c in commits { _ = try log.stage(type: Commit.frameType, payload: Commit(mutations: c).encode(version: 1).payload) }
        try log.flush()
        try log.close()
    }

    /// The metadata on disk.
    func metadata() throws -> StoreMetadata {
        try JSONDecoder().decode(StoreMetadata.self, from: Data(contentsOf: URL(fileURLWithPath: path + "/" + StoreMetadata.fileName)))
    }
}

@Suite struct CatalogMigrationTests {
    @Test func aFormat1StoreIsReadAsItIsReadOnlyAndMigratedByItsFirstReadWriteOpen() async throws {
        let dir = TempDir("migrate")
        let old = try Format1Store(at: dir.sub("store"))

        // Read-only: the catalog partition 0 holds, in memory; nothing is written.
        let inspector = try StoreInspector(path: old.path)
        #expect(inspector.catalogInPartitionZero)
        let readOnly = try inspector.openStore()
        #expect(readOnly.catalog.log == nil)
        #expect(readOnly.catalog.snapshot().schema.types == old.schema.types)
        #expect(inspector.catalogEntries(in: readOnly).compactMap(\.subscription?.id) == ["a"])
        try readOnly.closeNow()
        #expect(!FileManager.default.fileExists(atPath: old.path + "/" + Catalog.directoryName))
        let before = try inspector.verify(deep: true)
        #expect(before.isClean && before.findings.contains { $0.message.contains("still in partition 0") }, "\(before.findings)")

        // Read-write: migrated, once.
        var store = try await CloudletStore.open(at: old.path, configuration: StoreConfiguration(durability: .os))
        let migration = try #require(store.migration)
        #expect(migration.recordTypes == 2 && migration.fields == 3 && migration.indexFlags == 1 && migration.subscriptions == 1)
        #expect(migration.catalogVersion == 1 && !migration.resumed)
        let onDisk = try old.metadata().format
        #expect(store.metadata.format == StoreMetadata.currentFormat && onDisk == StoreMetadata.currentFormat)
        #expect(store.catalog.snapshot().version == 1)
        #expect(store.catalog.snapshot().schema.types == old.schema.types)
        #expect(store.partitions[0].state.withLock { $0.legacyCatalog } == nil)
        let container = try store.container(testContainer)
        let db = try container.privateDatabase(user: "alice")
        #expect(try await db.subscriptions().map(\.id) == ["a"])
        #expect(try await db.record(for: RecordID(recordName: "n1", zoneID: old.zone0.zoneID))["title"] == .string("x"))
        #expect(try await db.record(for: RecordID(recordName: "n2", zoneID: old.zone1.zoneID))["count"] == .int64(1))
        await store.waitForIndexBuilds()
        let page = try await db.query(try Query(recordType: "Note", format: "title == 'x'"), zoneID: old.zone1.zoneID)
        #expect(page.records.map(\.recordName) == ["n2"] && page.plan.zones[0].usesIndex, "\(page.plan)")
        // The new catalog takes new fields; the data commit records the version it used.
        _ = try await db.save(Record(recordType: "Note", recordName: "n3", zoneID: old.zone1.zoneID, fields: ["extra": .double(1.5)]))
        #expect(store.catalog.snapshot().version == 2)
        #expect(store.partition(for: old.zone1).state.withLock { $0.catalogVersion } == 2)

        // Partition 0's old catalog mutations are dead: compaction drops them.
        let dead = try inspector.dumpLog(
            filter: InspectionFilter(), states: inspector.states(of: store), frames: nil,
            mutations: { m in
                if [.schemaField, .saveSubscription, .deleteSubscription].contains(m.kind) { #expect(m.live == false, "\(m)") }
            })
        #expect(dead.isEmpty)
        try await store.compact(includeActiveSegment: true)
        var left: [String] = []
        _ = try LogWalker(directory: old.path + "/p0000").walk { frame in
            for m in try Commit.decode(try frame.payload()).commit.mutations where m.isCatalogMutation { left.append(m.kindName) }
        }
        #expect(left.isEmpty, "\(left)")
        try await store.close()

        store = try await CloudletStore.open(at: old.path, configuration: StoreConfiguration(durability: .os))
        #expect(store.migration == nil)
        let reopened = try store.container(testContainer)
        #expect(reopened.schema(environment: .development) == container.schema(environment: .development))
        #expect(try await reopened.privateDatabase(user: "alice").subscriptions().map(\.id) == ["a"])
        try await store.close()
        let after = try StoreInspector(path: old.path).verify(deep: true)
        #expect(after.isClean && after.findings.isEmpty && after.catalog?.lastLSN == 2, "\(after.findings)")
    }

    @Test func anInterruptedMigrationIsFinishedWithoutRepeatingIt() async throws {
        let dir = TempDir("migrate-again")
        let old = try Format1Store(at: dir.sub("store"))
        var store = try await CloudletStore.open(at: old.path, configuration: StoreConfiguration(durability: .os))
        #expect(store.migration?.catalogVersion == 1)
        try await store.close()
        // As if the open had stopped after the catalog commit was durable, before the metadata said format 2.
        var metadata = try old.metadata()
        metadata.format = 1
        try metadata.save(directory: old.path)

        store = try await CloudletStore.open(at: old.path, configuration: StoreConfiguration(durability: .os))
        let migration = try #require(store.migration)
        #expect(migration.resumed && migration.catalogVersion == 1)
        #expect(store.catalog.snapshot().version == 1, "the catalog did not get the migration commit twice")
        #expect(store.catalog.snapshot().schema.types == old.schema.types)
        let onDisk = try old.metadata().format
        #expect(onDisk == StoreMetadata.currentFormat)
        try await store.close()
    }

    @Test func theToolMigratesAFormat1StoreAndSaysSoOnce() async throws {
        let dir = TempDir("migrate-tool")
        let old = try Format1Store(at: dir.sub("store"))
        let info = try await tool("info", "--data", old.path)
        #expect(info.code == 0 && info.stdout.contains("store \(old.path): format 1") && info.stdout.contains("catalog: in partition 0's log"), "\(info)")
        let first = try await tool("compact", "--data", old.path)
        #expect(first.code == 0, "\(first)")
        let notes = first.stderr.components(separatedBy: "migrated the store from format 1 to \(StoreMetadata.currentFormat)").count - 1
        #expect(notes == 1 && first.stderr.contains("moved 2 record type(s), 3 field(s), 1 index flag setting(s) and 1 subscription(s)"), "\(first)")
        let second = try await tool("compact", "--data", old.path)
        #expect(second.code == 0 && !second.stderr.contains("migrated"), "\(second)")
        let after = try await tool("info", "--data", old.path)
        #expect(after.stdout.contains("format \(StoreMetadata.currentFormat)") && after.stdout.contains("catalog (catalog/): version 1"), "\(after)")
        let verify = try await tool("verify", "--data", old.path, "--deep")
        #expect(verify.code == 0 && !verify.stdout.contains("warning:"), "\(verify)")
    }
}
