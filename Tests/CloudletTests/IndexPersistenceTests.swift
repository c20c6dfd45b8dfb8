import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

extension PartitionState {
    /// Everything the secondary indexes hold — definitions, each record's stored values, each index's entries — in a
    /// canonical text form (indexes named by definition, not id), for comparing the state of two stores.
    func indexDump() throws -> String {
        var lines: [String] = []
        for (d, info) in indexes.definitions.sorted(by: { "\($0.key)" < "\($1.key)" }) {
            lines.append("def \(d) \(info.status) @\(info.definedAt)")
        }
        for z in keys.zoneKeys.sorted(by: { "\($0)" < "\($1)" }) {
            let zone = DirectoryKey.zone(z)
            let valuesTag = zone + [IndexKeyspace.valuesTag]
            var cursor = keys.indexCursor(LSMKeyRange(lower: valuesTag, upper: DirectoryKey.successor(valuesTag)))
            while let e = try cursor.next() {
                let n = Int(DirectoryKey.loadBE(e.key, at: zone.count + 1, bytes: 4))
                let type = String(decoding: e.key[(zone.count + 5)..<(zone.count + 5 + n)], as: UTF8.self)
                let name = String(decoding: e.key[(zone.count + 5 + n)...], as: UTF8.self)
                let v = try StoredValues.decode(e.value).map { ($0.key, $0.value.map { "\($0)" } ?? "missing") }.sorted { $0.0 < $1.0 }
                lines.append("\(z) \(type) stored \(name) \(v)")
            }
            for (d, info) in indexes.definitions.sorted(by: { "\($0.key)" < "\($1.key)" }) where SchemaKey(zone: z) == d.schema {
                let subspace = IndexKeyspace.Subspace(zone: zone, id: info.id)
                var c = d.maintainer.scan(keys, subspace, .all)
                var entries: [String] = []
                while let (e, value) = try c.nextWithValue() {
                    // A full-text key's posting (its frequency and the field's length) too.
                    let posting = value.isEmpty ? "" : "\(value)"
                    entries.append(d.kind == .ordered ? "\(e.valueKey):\(e.name)" : "\(e.valueKey)=\(e.name)\(posting)")
                }
                if !entries.isEmpty { lines.append("\(z) \(d.kind) \(d.recordType).\(d.field) \(entries)") }
                if let t = indexes.textTotals(d, zone: z), t != TextTotals() {
                    lines.append("\(z) totals \(d.recordType).\(d.field) \(t.documents) records \(t.tokens) tokens")
                }
            }
        }
        return lines.joined(separator: "\n")
    }
}

/// Index state is derived from the log: the same after a clean reopen (from the checkpoint), after a crash (replay,
/// then background builds), and as maintained live.
@Suite struct IndexPersistenceTests {
    func item(_ i: Int, zone: ZoneID) -> Record {
        var r = Record(recordType: "Item", recordName: "i\(i)", zoneID: zone)
        r["title"] = .string(["Red apple", "green Pear", "blue plum", "Café au lait"][i % 4] + " \(i % 7)")
        r["n"] = .int64(Int64(i % 13))
        if i % 5 != 0 { r["tags"] = .list(.string, [.string("t\(i % 3)"), .string("u\(i % 4)")]) }
        r["where"] = .location(Location(latitude: Double(i % 17) - 8, longitude: Double(i % 23) * 2))
        return r
    }

    func dumps(_ store: CloudletStore) throws -> String {
        try store.partitions.map { p in try p.state.withLock { try $0.indexDump() } }.joined(separator: "\n---\n")
    }

    @Test(arguments: [1, 3])
    func indexStateSurvivesReopenWithAndWithoutCheckpoint(partitions: Int) async throws {
        let dir = TempDir("index-persist")
        let store = try await openStore(dir, partitions: partitions)
        let container = try store.container(testContainer)
        let db = try container.privateDatabase(user: "u")
        let zones = [ZoneID.default, ZoneID(zoneName: "Z1"), ZoneID(zoneName: "Z2")]
        for z in zones where !z.isDefault { try await db.createZone(z) }
        // Records first, so the indexes below are built over existing records …
        for z in zones { _ = try await db.modify((0..<60).map { .create(item($0, zone: z)) }) }
        try await container.addIndexes([.queryable, .sortable, .searchable], recordType: "Item", field: "title")
        try await container.addIndexes([.queryable, .sortable], recordType: "Item", field: "n")
        try await container.addIndexes(.queryable, recordType: "Item", field: "tags")
        try await container.addIndexes(.queryable, recordType: "Item", field: "where")
        try await container.addIndexes(.sortable, recordType: "Item", field: "createdTimestamp")
        await store.waitForIndexBuilds()
        // … then changes the indexes must follow.
        for z in zones {
            var ops: [RecordOperation] = []
            for i in stride(from: 0, to: 60, by: 4) { ops.append(.forceDelete(RecordID(recordName: "i\(i)", zoneID: z))) }
            for i in stride(from: 1, to: 60, by: 6) {
                var r = item(i + 100, zone: z)
                r.id = RecordID(recordName: "i\(i)", zoneID: z)
                r["tags"] = nil
                ops.append(.forceReplace(r))
            }
            for i in 60..<70 { ops.append(.create(item(i, zone: z))) }
            _ = try await db.modify(ops)
        }
        let live = try dumps(store)
        #expect(live.contains("ready"))
        #expect(!live.contains("building"))
        #expect(live.contains(" stored i1 "))
        #expect(!live.contains(" stored i0 "), "deleted records leave no index values")

        // A crash image: the log as it is, no checkpoint.
        for p in store.partitions { try p.log.flush() }
        let image = dir.sub("image")
        try FileManager.default.copyItem(atPath: dir.sub("store"), toPath: image)
        try await store.close()
        for p in 0..<partitions {
            let pdir = image + "/" + StoreMetadata.partitionDirectoryName(p)
            for f in try FileManager.default.contentsOfDirectory(atPath: pdir) where f.hasSuffix(".ckpt") {
                try FileManager.default.removeItem(atPath: pdir + "/" + f)
            }
        }
        try? FileManager.default.removeItem(atPath: image + "/LOCK")

        let reopened = try await openStore(dir)
        #expect(reopened.statistics.framesReplayed == 0, "a clean close leaves a checkpoint")
        #expect(try dumps(reopened) == live, "from the checkpoint")
        try await reopened.close()

        let replayed = try await CloudletStore.open(at: image, configuration: StoreConfiguration(durability: .os))
        #expect(replayed.statistics.framesReplayed > 0)
        await replayed.waitForIndexBuilds()
        #expect(try dumps(replayed) == live, "from the log, with the indexes built again in the background")
        try await replayed.close()
    }

    @Test func aCheckpointTakenWhileAnIndexIsBuildingRebuildsItAfterOpen() async throws {
        let dir = TempDir("index-building")
        let store = try await openStore(dir)
        let container = try store.container(testContainer)
        let db = try container.privateDatabase(user: "u")
        _ = try await db.modify((0..<50).map { .create(item($0, zone: .default)) })
        // Define the index directly (no build started): as if the process stopped right after the schema change.
        let (_, version) = try await store.catalog.commit(waitingForRoom: { st in
            (try st.schema.indexAdditions(SchemaKey(container: testContainer, environment: .development), recordType: "Item", field: "n", .sortable), ())
        })
        try await store.catalog.waitDurable(version)
        _ = try await store.partitions[0].commit(waitingForRoom: { st, _ in
            (IndexReconciler.mutations(schema: store.catalog.snapshot().schema, indexes: st.indexes), ())
        })
        #expect(store.partitions[0].state.withLock { $0.indexes.building.count } == 1)
        try await store.close()  // the checkpoint records the index as building
        let reopened = try await openStore(dir)
        await reopened.waitForIndexBuilds()
        let dump = try reopened.partitions[0].state.withLock { try $0.indexDump() }
        #expect(dump.contains("ordered index on 'n'") && dump.contains("ready"))
        #expect(dump.components(separatedBy: ":i").count - 1 == 50, "every record is in the ordered index:\n\(dump)")
        try await reopened.close()
    }
}
