import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet
@testable import CloudletStorage

/// The secondary indexes as key ranges of the key directory (IndexMaintainer.swift, IndexState.swift): against a
/// plain model of each index through puts, deletes, type changes and zone deletions with flushes, merges and
/// reopens; the flushed state staying small; the migration of a version-6 flushed state; damage to the keys.
@Suite struct SecondaryIndexTests {
    static let fields: [(String, IndexFlags)] = [
        ("s", [.queryable, .sortable, .searchable]), ("n", .sortable), ("tags", .queryable), ("where", .queryable),
    ]

    static func item(_ name: String, type: String, zone: ZoneID, _ rng: inout SeededRandom) -> Record {
        var r = Record(recordType: type, recordName: name, zoneID: zone)
        let words = ["red apple", "Green pear", "blue plum", "café au lait", "apple pie", ""]
        if !rng.chance(15) { r["s"] = .string(words[rng.int(words.count)] + (rng.chance(50) ? " \(rng.int(5))" : "")) }
        if !rng.chance(15) { r["n"] = .int64(Int64(rng.int(40)) - 10) }
        if rng.chance(60) { r["tags"] = .list(.string, (0..<rng.int(3)).map { _ in .string("t\(rng.int(5))") }) }
        if rng.chance(70) { r["where"] = .location(Location(latitude: Double(rng.int(170)) - 85, longitude: Double(rng.int(350)) - 175)) }
        return r
    }

    /// The model's entries of one index: (value key, name) pairs, from the records' values by the index's own key
    /// functions (``EqualityKey``, ``SortKey``, ``TextTokenizer``, ``GeoCells``) — no key encoding, no scans.
    static func modelEntries(_ kind: IndexKind, field: String, _ records: [Record]) -> [IndexEntry] {
        var out: Set<IndexEntry> = []
        for r in records {
            let v = IndexedField.value(field, in: r)
            let keys: [[UInt8]]
            switch kind {
            case .equality: keys = v.map { EqualityKey.keys($0).map(\.encoded) } ?? []
            case .ordered:
                if case .list(_, let items)? = v { keys = items.map { SortKey.encode($0) } } else { keys = [SortKey.encode(v)] }
            case .text: keys = v.map { textTokens($0).map { Array($0.utf8) } } ?? []
            case .spatial:
                keys = v.map { spatialCells($0).map { c in (0..<8).map { UInt8(truncatingIfNeeded: c >> (56 - 8 * UInt64($0))) } } } ?? []
            case .composite:
                // This suite declares none (CompositeIndexTests checks them against brute force).
                keys = []
            }
            for k in keys { out.insert(IndexEntry(valueKey: k, name: r.recordName)) }
        }
        return out.sorted()
    }

    /// Compares every index of `type` in every zone of the model with a scan of the partition's keys: whole, by
    /// value key (exactly, or a range of an ordered index), backwards, and resumed from a continuation.
    static func check(_ store: CloudletStore, _ model: [String: [String: Record]], _ rng: inout SeededRandom, _ context: String) throws {
        try store.partitions[0].state.withLock { st in
            for (zoneName, records) in model {
                let z = ZoneKey(database: DatabaseID(container: testContainer, environment: .development, scope: .private, owner: "u"), zoneName: zoneName)
                for type in ["Item", "Other"] {
                    let ofType = records.values.filter { $0.recordType == type }
                    #expect(st.indexes.recordCount(z, type) == ofType.count, "\(context): count of \(type) in \(zoneName)")
                    for (d, info) in st.indexes.definitions where d.recordType == type {
                        #expect(info.status == .ready, "\(context): \(d)")
                        let expected = modelEntries(d.kind, field: d.field, ofType)
                        let subspace = try #require(st.indexes.subspace(d, zone: z))
                        let m = d.maintainer
                        func all(
                            _ range: IndexKeyspace.ValueRange, after: IndexEntry? = nil, inclusive: Bool = false, reverse: Bool = false
                        ) throws -> [IndexEntry] {
                            var c = m.scan(st.keys, subspace, range, after: after, inclusive: inclusive, reverse: reverse)
                            var out: [IndexEntry] = []
                            while let e = try c.next() { out.append(e) }
                            return out
                        }
                        let got = try all(.all)
                        #expect(got == expected, "\(context): \(d) in \(zoneName)")
                        #expect(try all(.all, reverse: true) == expected.reversed(), "\(context): \(d) backwards")
                        guard let probe = expected.randomElement(using: &rng) else { continue }
                        if d.kind == .ordered {
                            let other = expected.randomElement(using: &rng)!.valueKey
                            let (lo, hi) = LSMKey.less(probe.valueKey, other) ? (probe.valueKey, other) : (other, probe.valueKey)
                            let inRange = expected.filter { !LSMKey.less($0.valueKey, lo) && LSMKey.less($0.valueKey, hi) }
                            #expect(try all(.between(lo, hi)) == inRange, "\(context): \(d) range")
                            #expect(try all(.between(lo, nil), reverse: true) == expected.filter { !LSMKey.less($0.valueKey, lo) }.reversed())
                        } else {
                            #expect(try all(.exactly(probe.valueKey)) == expected.filter { $0.valueKey == probe.valueKey }, "\(context): \(d) lookup")
                        }
                        #expect(try all(.all, after: probe) == expected.filter { probe < $0 }, "\(context): \(d) resumed")
                        #expect(try all(.all, after: probe, reverse: true) == expected.filter { $0 < probe }.reversed())
                        #expect(try all(.all, after: probe, inclusive: true) == expected.filter { !($0 < probe) })
                    }
                }
            }
        }
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func indexesMatchAModelThroughWritesFlushesMergesAndReopens(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let dir = TempDir("sidx-model")
        var store = try await openStore(dir)
        var container = try store.container(testContainer)
        var db = try container.privateDatabase(user: "u")
        // The schema: both types with every field, then the indexes (built over no records).
        var seedRecord = Record(recordType: "Item", recordName: "seed")
        seedRecord["s"] = .string("x"); seedRecord["n"] = .int64(1); seedRecord["tags"] = .list(.string, [.string("t")])
        seedRecord["where"] = .location(Location(latitude: 1, longitude: 1))
        var other = seedRecord
        other.recordType = "Other"
        other.id = RecordID(recordName: "seed2")
        _ = try await db.modify([.create(seedRecord), .create(other)])
        _ = try await db.modify([.forceDelete(seedRecord.id), .forceDelete(other.id)])
        for (f, flags) in Self.fields.prefix(3) {
            try await container.addIndexes(flags, recordType: "Item", field: f)
            try await container.addIndexes(flags.subtracting(.searchable), recordType: "Other", field: f)
        }
        await store.waitForIndexBuilds()
        var model: [String: [String: Record]] = ["_defaultZone": [:], "Z": [:]]
        try await db.createZone(ZoneID(zoneName: "Z"))
        let names = (0..<40).map { "r\($0)" }
        for step in 0..<60 {
            let roll = rng.int(100)
            let zoneName = rng.chance(50) ? "Z" : "_defaultZone"
            let zone = ZoneID(zoneName: zoneName)
            if roll < 4 && zoneName == "Z" {
                try await db.deleteZone(zone)
                try await db.createZone(zone)
                model["Z"] = [:]
            } else if roll < 8 {
                try store.partitions[0].flushIndex(force: true)
            } else if roll < 11 {
                try store.partitions[0].flushIndex(force: true)
                try store.partitions[0].index?.mergeUntilIdle()
            } else if roll < 14 {
                try await store.close()
                store = try await openStore(dir)
                container = try store.container(testContainer)
                db = try container.privateDatabase(user: "u")
            } else if step == 30 {
                // An index defined over existing records: built in the background, then maintained.
                try await container.addIndexes(.queryable, recordType: "Item", field: "where")
                await store.waitForIndexBuilds()
            } else {
                var ops: [RecordOperation] = []
                for name in Set((0..<(1 + rng.int(8))).map { _ in names[rng.int(names.count)] }) {
                    if rng.chance(25) {
                        guard model[zoneName]![name] != nil else { continue }
                        ops.append(.forceDelete(RecordID(recordName: name, zoneID: zone)))
                    } else {
                        // A record keeps its type while it exists; one deleted and saved again may take the other
                        // type (CloudKit refuses a type change), moving from one type's indexes to the other's.
                        let type = model[zoneName]![name]?.recordType ?? (rng.chance(30) ? "Other" : "Item")
                        ops.append(.forceReplace(Self.item(name, type: type, zone: zone, &rng)))
                    }
                }
                guard !ops.isEmpty else { continue }
                let results = try await db.modify(ops)
                for (op, result) in zip(ops, results) {
                    try #require(result.code == nil, "seed \(seed) step \(step): \(result)")
                    if case .forceDelete = op { model[zoneName]![op.recordID.recordName] = nil } else { model[zoneName]![op.recordID.recordName] = result.record }
                }
            }
            if step % 10 == 9 { try Self.check(store, model, &rng, "seed \(seed) step \(step)") }
        }
        try Self.check(store, model, &rng, "seed \(seed) end")
        try await store.close()
        store = try await openStore(dir)
        try Self.check(store, model, &rng, "seed \(seed) reopened")
        try await store.close()
    }

    /// The flushed state blob of partition 0.
    static func flushedState(_ store: CloudletStore) throws -> [UInt8] {
        try #require(try store.partitions[0].state.withLock { try $0.keys.flushedState() })
    }

    static func book(_ i: Int) -> Record {
        var r = Record(recordType: "Book", recordName: "b\(i)")
        r["kind"] = .string(["novel", "poem", "essay"][i % 3])
        r["price"] = .int64(Int64(i % 50))
        return r
    }

    /// A store in `dir` with books `0 ..< count` and the indexes `indexes` built over them.
    static func books(_ dir: TempDir, _ count: Int, indexes: [(IndexFlags, String)]) async throws -> CloudletStore {
        let store = try await openStore(dir)
        let container = try store.container(testContainer)
        for start in stride(from: 0, to: count, by: 200) {
            _ = try await container.privateDatabase(user: "u").modify((start..<min(start + 200, count)).map { .create(book($0)) })
        }
        for (flags, field) in indexes { try await container.addIndexes(flags, recordType: "Book", field: field) }
        await store.waitForIndexBuilds()
        return store
    }

    @Test func theFlushedStateHoldsNoPerRecordValuesAndQueriesAnswerFromTheIndexAfterReopen() async throws {
        let dir = TempDir("sidx-reopen")
        var store = try await Self.books(dir, 30, indexes: [(.queryable, "kind"), (.sortable, "price")])
        var container = try store.container(testContainer)
        var db = try container.privateDatabase(user: "u")
        try await store.close()
        store = try await openStore(dir)
        let small = try Self.flushedState(store).count
        db = try store.container(testContainer).privateDatabase(user: "u")
        for start in stride(from: 30, to: 3_000, by: 200) {
            _ = try await db.modify((start..<min(start + 200, 3_000)).map { .create(Self.book($0)) })
        }
        try await store.close()
        store = try await openStore(dir)
        #expect(store.statistics.framesReplayed == 0)
        let state = try Self.flushedState(store)
        #expect(state.first == PartitionState.stateVersion)
        // 100 times the records, the same state but for a few varints growing by a byte (the record count, the
        // live bytes of the log's segment): nothing per record.
        #expect(state.count <= small + 8, "state of \(state.count) bytes with 3000 records, \(small) with 30")
        #expect(state.count < 1_000)
        container = try store.container(testContainer)
        db = try container.privateDatabase(user: "u")
        let novels = try await db.query(try Query(recordType: "Book", format: "kind == 'novel'"), resultsLimit: 200)
        #expect(novels.records.count == 200 && novels.records.allSatisfy { $0["kind"] == .string("novel") })
        #expect(novels.plan.zones[0].access.contains("equality index on 'kind'"), "\(novels.plan)")
        #expect(try await db.count(try Query(recordType: "Book", format: "kind == 'novel'")) == 1_000)
        let cheap = try await db.query(
            try Query(recordType: "Book", format: "price < 2", sortDescriptors: [QuerySort("price", ascending: false)]), resultsLimit: 200)
        #expect(cheap.records.count == 120 && cheap.records.first?["price"] == .int64(1) && cheap.records.last?["price"] == .int64(0))
        #expect(cheap.plan.zones[0].access.contains("ordered index on 'price'"), "\(cheap.plan)")
        #expect(try await db.count(Query(recordType: "Book")) == 3_000)
        try await store.close()
    }

    /// The flushed state of version 6 that the previous release wrote for `state`: the same fields, then the
    /// definitions without ids and every indexed record's values by slot (as ``IndexState`` then encoded them).
    static func encodeV6(_ st: PartitionState) throws -> [UInt8] {
        let v7 = st.encodeState()
        var r = ByteReader(v7, what: "state")
        _ = try r.u8()
        // Everything up to the indexes is as version 6 had it: find where they start by decoding them at the end.
        var prefixEnd = v7.count
        for end in stride(from: v7.count - 1, to: 0, by: -1) {
            var t = ByteReader(v7, from: end, what: "indexes")
            if let decoded = try? IndexState.decode(&t), t.isAtEnd, decoded.definitions == st.indexes.definitions {
                prefixEnd = end
                break
            }
        }
        var w = ByteWriter()
        w.u8(6)
        w.raw(v7[1..<prefixEnd])
        let defs = st.indexes.definitions.sorted { $0.value.id < $1.value.id }
        w.varint(defs.count)
        for (d, info) in defs {
            IndexMutation.encode(d, into: &w)
            w.u8(info.status.rawValue)
            w.u64(info.definedAt)
        }
        var zones: [(ZoneKey, [(String, [String], [(String, [UInt8])])])] = []
        for z in st.keys.zoneKeys {
            let zone = DirectoryKey.zone(z)
            var types: [String: [(String, [UInt8])]] = [:]
            var slots: [String: [String]] = [:]
            let tag = zone + [IndexKeyspace.valuesTag]
            var c = st.keys.indexCursor(LSMKeyRange(lower: tag, upper: DirectoryKey.successor(tag)))
            while let e = try c.next() {
                let n = Int(DirectoryKey.loadBE(e.key, at: zone.count + 1, bytes: 4))
                let type = String(decoding: e.key[(zone.count + 5)..<(zone.count + 5 + n)], as: UTF8.self)
                let name = String(decoding: e.key[(zone.count + 5 + n)...], as: UTF8.self)
                var bySlot = ByteWriter()
                let values = try StoredValues.decode(e.value)
                bySlot.varint(values.count)
                for (f, v) in values.sorted(by: { $0.key < $1.key }) {
                    if !slots[type, default: []].contains(f) { slots[type, default: []].append(f) }
                    bySlot.varint(slots[type]!.firstIndex(of: f)!)
                    if let v {
                        bySlot.u8(1)
                        RecordCodec.encode(v, into: &bySlot)
                    } else {
                        bySlot.u8(0)
                    }
                }
                types[type, default: []].append((name, bySlot.bytes))
            }
            if !types.isEmpty { zones.append((z, types.map { ($0.key, slots[$0.key]!, $0.value) })) }
        }
        w.varint(zones.count)
        for (z, types) in zones {
            Commit.encode(z, into: &w)
            w.varint(types.count)
            for (type, slots, stored) in types {
                w.string(type)
                w.varint(slots.count)
                for s in slots { w.string(s) }
                w.varint(stored.count)
                for (name, values) in stored {
                    w.string(name)
                    w.bytes(values)
                }
            }
        }
        return w.bytes
    }

    @Test func aStoreFlushedWithVersion6StateIsMigratedOnOpen() async throws {
        let dir = TempDir("sidx-migrate")
        var store = try await Self.books(dir, 150, indexes: [(.queryable, "kind"), (.sortable, "price")])
        var container = try store.container(testContainer)
        var db = try container.privateDatabase(user: "u")
        _ = try await db.modify((150..<300).map { .create(Self.book($0)) })
        let before = try store.partitions[0].state.withLock { try $0.indexDump() }
        try await store.close()

        // Rewrite the index as the previous release left it: no index keys or stored values, a version-6 state.
        let indexDir = Partition.indexDirectory(dir.sub("store") + "/" + StoreMetadata.partitionDirectoryName(0))
        var config = LSMTreeConfiguration()
        config.backgroundMerges = false
        let tree = try LSMTree(directory: indexDir, fileSystem: PosixFileSystem(), configuration: config)
        let position = tree.logPosition
        let base = tree.runsView()
        let state = try PartitionState.decodeState(try #require(try base.get(DirectoryKey.state)), base: base)
        var memtable = Memtable()
        var removed = 0
        for z in state.keys.zoneKeys {
            let zone = DirectoryKey.zone(z)
            let range = LSMKeyRange(lower: zone + [IndexKeyspace.indexTag], upper: zone + [IndexKeyspace.valuesTag + 1])
            var c = state.keys.indexCursor(range)
            while let e = try c.next() {
                memtable.delete(e.key, sequence: state.lastLSN)
                removed += 1
            }
        }
        #expect(removed == 300 * 4, "a record's stored values and its keys in three indexes: kind (equality, and ordered for BEGINSWITH), price")
        memtable.put(DirectoryKey.state, try Self.encodeV6(state), sequence: state.lastLSN)
        try tree.flush(memtable, logPosition: position)
        tree.close()

        store = try await openStore(dir)
        #expect(store.statistics.framesReplayed == 0)
        #expect(try Self.flushedState(store).first == PartitionState.stateVersion, "the migrated index was flushed at open")
        #expect(try store.partitions[0].state.withLock { try $0.indexDump() } == before)
        container = try store.container(testContainer)
        db = try container.privateDatabase(user: "u")
        let poems = try await db.query(try Query(recordType: "Book", format: "kind == 'poem' AND price >= 40"), resultsLimit: 200)
        #expect(Set(poems.records.map(\.recordName)) == Set((0..<300).filter { $0 % 3 == 1 && $0 % 50 >= 40 }.map { "b\($0)" }))
        try await store.close()
        store = try await openStore(dir)
        #expect(try store.partitions[0].state.withLock { try $0.indexDump() } == before, "and read back as version 7")
        try await store.close()
    }

    @Test func verifyDeepChecksTheIndexKeysAgainstTheStoredValues() async throws {
        let dir = TempDir("sidx-verify")
        let store = try await Self.books(dir, 100, indexes: [(.sortable, "price")])
        let db = try store.container(testContainer).privateDatabase(user: "u")
        _ = try await db.modify((100..<150).map { .create(Self.book($0)) })
        try await store.close()
        let clean = try await tool("verify", "--data", dir.sub("store"), "--deep")
        #expect(clean.code == 0, "\(clean)")

        // Lose one index key, as a bug in maintenance would.
        try rewritePartitionDirectory(dir.sub("store")) { state, memtable in
            let d = try #require(state.indexes.definitions.keys.first { $0.field == "price" })
            let zone = try #require(state.keys.zoneKeys.first)
            let subspace = try #require(state.indexes.subspace(d, zone: zone))
            var c = state.keys.indexCursor(subspace.keyRange(.all))
            memtable.delete(try #require(try c.next()).key, sequence: state.lastLSN)
        }
        let bad = try await tool("verify", "--data", dir.sub("store"), "--deep")
        #expect(bad.code != 0 && (bad.stdout + bad.stderr).contains("secondary indexes") && (bad.stdout + bad.stderr).contains("lacks record"), "\(bad)")
    }

    @Test func damagedIndexKeysFailTheQueryThatReadsThemAndTheIndexIsRebuiltOnTheNextOpen() async throws {
        let dir = TempDir("sidx-damage")
        var store = try await Self.books(dir, 200, indexes: [(.queryable, "kind")])
        let (indexKey, subspaceCount) = try store.partitions[0].state.withLock { st -> ([UInt8], Int) in
            let d = try #require(st.indexes.definitions.keys.first)
            let z = try #require(st.keys.zoneKeys.first)
            let subspace = try #require(st.indexes.subspace(d, zone: z))
            var c = st.keys.indexCursor(subspace.keyRange(.exactly(EqualityKey.text("poem").encoded)))
            return (try #require(try c.next()).key, subspace.prefix.count)
        }
        #expect(subspaceCount > 0)
        try await store.close()

        // Flip a byte in the block of the newest run that holds the index's keys for 'poem'.
        let indexDir = Partition.indexDirectory(dir.sub("store") + "/" + StoreMetadata.partitionDirectoryName(0))
        let run = try #require(try FileManager.default.contentsOfDirectory(atPath: indexDir).filter { $0.hasSuffix(SortedRunFile.suffix) }.max())
        let reader = try SortedRunReader(path: indexDir + "/" + run, fileNumber: SortedRunFile.number(fileName: run)!, fileSystem: PosixFileSystem())
        let it = reader.makeIterator()
        try it.seek(indexKey)
        #expect(it.current?.key == indexKey)
        let target = try reader.dataBlocks[try reader.runIndex().separators.firstAtLeast(indexKey)]
        reader.close()
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: indexDir + "/" + run)))
        bytes[Int(target.offset + target.size / 2)] ^= 0x10
        try Data(bytes).write(to: URL(fileURLWithPath: indexDir + "/" + run))

        store = try await openStore(dir)
        var db = try store.container(testContainer).privateDatabase(user: "u")
        await expectError(.corruption) {
            _ = try await db.query(try Query(recordType: "Book", format: "kind == 'poem'"), resultsLimit: 200)
        }
        try await store.close()
        #expect(FileManager.default.fileExists(atPath: indexDir + "/" + LSMTree.damagedFileName), "the read marked the index damaged")

        store = try await openStore(dir)
        #expect(store.statistics.recoveryFindings.contains { $0.contains("set aside the index") }, "\(store.statistics.recoveryFindings)")
        await store.waitForIndexBuilds()
        db = try store.container(testContainer).privateDatabase(user: "u")
        let poems = try await db.query(try Query(recordType: "Book", format: "kind == 'poem'"), resultsLimit: 200)
        #expect(Set(poems.records.map(\.recordName)) == Set((0..<200).filter { $0 % 3 == 1 }.map { "b\($0)" }))
        #expect(poems.plan.zones[0].access.contains("equality index on 'kind'"), "\(poems.plan)")
        try await store.close()
    }
}
