import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet
@testable import CloudletStorage

/// Composite indexes (`INDEX name (a, b DESC)`): the schema language, the catalog, the key encoding, the planner's
/// range walks and counts read off an index.
@Suite struct CompositeIndexTests {
    static let text = """
        DEFINE SCHEMA
            RECORD TYPE Photo (
                "___createTime" TIMESTAMP SORTABLE,
                photographer REFERENCE QUERYABLE,
                taken TIMESTAMP,
                rating INT64,
                INDEX byPhotographer (photographer, taken DESC),
                INDEX byRating (rating ASC, "___createTime" DESC, photographer)
            );
        """

    @Test func parsesAndPrints() throws {
        let doc = try SchemaLanguage.parse(Self.text)
        let photo = try #require(doc.recordTypes.first)
        #expect(photo.fields.map(\.name).contains("taken"))
        #expect(
            photo.indexes == [
                CompositeIndex(name: "byPhotographer", components: [IndexComponent("photographer"), IndexComponent("taken", descending: true)]),
                CompositeIndex(
                    name: "byRating",
                    components: [IndexComponent("rating"), IndexComponent("createdTimestamp", descending: true), IndexComponent("photographer")]),
            ])
        // A quoted index name; a field named INDEX is still a field.
        let quoted = try SchemaLanguage.parse("DEFINE SCHEMA RECORD TYPE A (x INT64, INDEX INT64, INDEX \"index\" (x, INDEX DESC));")
        #expect(quoted.recordTypes[0].fields.map(\.name) == ["x", "INDEX"])
        let index = CompositeIndex(name: "index", components: [IndexComponent("x"), IndexComponent("INDEX", descending: true)])
        #expect(quoted.recordTypes[0].indexes == [index])
        #expect(try SchemaLanguage.parse("DEFINE SCHEMA RECORD TYPE A (x INT64, INDEX INT64, INDEX \(index));").recordTypes[0].indexes == [index])
        let t = RecordTypeSchema(
            name: "Photo", fields: ["photographer": FieldType(.reference), "rating": FieldType(.int64)],
            composites: ["r": CompositeIndex(name: "r", components: [IndexComponent("rating"), IndexComponent("recordName", descending: true)])])
        #expect(SchemaLanguage.format([t]).contains("        INDEX r (rating, \"___recordID\" DESC)\n    );"), "\(SchemaLanguage.format([t]))")
    }

    @Test func catalogStoresExportsImportsAndDrops() async throws {
        let dir = TempDir("composite-catalog")
        var store = try await openStore(dir)
        let a = try store.container(testContainer)
        let result = try await a.importSchema(Self.text)
        #expect(result.indexes.contains("Photo INDEX byPhotographer (photographer, taken DESC)"), "\(result)")
        let exported = a.exportSchema()
        #expect(exported.contains("INDEX byRating (rating, \"___createTime\" DESC, photographer)"), "\(exported)")
        #expect(try await a.importSchema(exported).isEmpty, "importing the export again adds nothing")

        // Round trip into another container, and through a reopen (the catalog's checkpoint and log).
        let b = try store.container("iCloud.com.example.other")
        try await b.importSchema(exported)
        #expect(b.exportSchema() == exported)
        try await store.close()
        store = try await openStore(dir)
        #expect(try store.container(testContainer).exportSchema() == exported)
        let c = try store.container(testContainer)

        // A changed definition under the same name is refused, naming the index; API errors name index and field.
        let changed = Self.text.replacingOccurrences(of: "taken DESC", with: "taken")
        let e1 = await expectError(.invalidArguments) { try await c.importSchema(changed) }
        #expect(e1?.message.contains("index 'byPhotographer' of record type 'Photo' is byPhotographer (photographer, taken DESC)") == true, "\(e1?.message ?? "")")
        let e2 = await expectError(.invalidArguments) {
            try await c.addCompositeIndex(CompositeIndex(name: "x", components: [IndexComponent("rating"), IndexComponent("nope")]), recordType: "Photo")
        }
        #expect(e2?.message.contains("field 'nope'") == true && e2?.message.contains("index 'x'") == true, "\(e2?.message ?? "")")

        // Each partition defines the index, builds it, and drops it when the schema removes it.
        func defined() -> [IndexDefinition] {
            store.partitions.flatMap { p in
                p.state.withLock { $0.indexes.definitions.keys.filter { $0.kind == .composite && $0.schema.container == testContainer } }
            }
        }
        #expect(defined().count == 2 * store.partitions.count)
        try await c.removeCompositeIndex(named: "byRating", recordType: "Photo")
        #expect(defined().map(\.field).allSatisfy { $0 == "byPhotographer" })
        #expect(!c.exportSchema().contains("byRating"))
        let e3 = await expectError(.invalidArguments) { try await c.removeCompositeIndex(named: "byRating", recordType: "Photo") }
        #expect(e3?.message.contains("no index 'byRating'") == true)

        // Deploying carries it to production; a reset of development to production keeps it.
        try await c.deploySchema()
        #expect(c.exportSchema(environment: .production).contains("INDEX byPhotographer"))
        try await store.close()
    }

    /// Keys order as the tuples do: field by field, each ascending or descending, the missing value first
    /// (ascending); a string before the last field by its lowercased form (as EQUALS compares strings).
    @Test func keysOrderAsTuples() {
        var rng = SeededRandom(seed: 7)
        let components = [IndexComponent("a"), IndexComponent("b", descending: true), IndexComponent("c")]
        let m = CompositeMaintainer(components: components)
        let strings = ["", "a", "A", "a\u{0}", "ab", "aB", "b", "\u{0}"]
        func value(_ rng: inout SeededRandom, _ i: Int) -> FieldValue? {
            if rng.chance(15) { return nil }
            switch i {
            case 0: return .string(rng.pick(strings))
            case 1: return .int64(Int64(rng.int(7) - 3))
            default: return .bytes(rng.pick([[], [0], [0, 0], [1], [0, 255]]))
            }
        }
        func compare(_ x: [FieldValue?], _ y: [FieldValue?]) -> Int {
            for (i, c) in components.enumerated() {
                var r: Int
                switch (x[i], y[i]) {
                case (nil, nil): r = 0
                case (nil, _): r = -1
                case (_, nil): r = 1
                case (.string(let a)?, .string(let b)?): r = FieldOrder.compare(.string(a.lowercased()), .string(b.lowercased())) ?? 0
                case (let a?, let b?): r = FieldOrder.compare(a, b) ?? 0
                }
                if c.descending { r = -r }
                if r != 0 { return r }
            }
            return 0
        }
        let tuples = (0..<300).map { _ in (0..<3).map { value(&rng, $0) } }
        for x in tuples.prefix(60) {
            for y in tuples {
                let kx = m.valueKeys(x, name: "r")[0], ky = m.valueKeys(y, name: "r")[0]
                #expect(SortKey.compare(kx, ky).signum() == compare(x, y).signum(), "\(x) vs \(y)")
            }
            let expected = [x[0]?.stringValue.map(CompositeMaintainer.foldedKey) ?? SortKey.encode(x[0]), SortKey.encode(x[1]), SortKey.encode(x[2])]
            for i in 0..<3 { #expect(m.fieldKey(m.valueKeys(x, name: "r")[0], field: i) == expected[i]) }
        }
        // The example of docs/index-layer.md, "Composite indexes".
        let example = CompositeMaintainer(components: [IndexComponent("s"), IndexComponent("t", descending: true)])
        let key = example.valueKeys([.string("ab"), nil], name: "r1")[0]
        #expect(key == [0x03, 0x61, 0x62, 0x00, 0x00, 0xFF, 0x00, 0xFF, 0xFF, 0x8D, 0xCE, 0xFF, 0xFF])
        let tree = IndexKeyspace.Subspace(zone: [], id: 9).key(key, "r1")
        #expect(Array(tree.dropFirst(5)) == [0x03, 0x61, 0x62, 0x00, 0xFF, 0x00, 0xFF, 0xFF, 0x00, 0xFF, 0xFF, 0xFF, 0x8D, 0xCE, 0xFF, 0xFF, 0x00, 0x00, 0x72, 0x31])
        // A last field descending: records equal on every field in descending name order.
        let d = CompositeMaintainer(components: [IndexComponent("a"), IndexComponent("b", descending: true)])
        let names = ["a", "b", "b0", "c", "ab"]
        let keys = names.map { d.valueKeys([.int64(1), .int64(2)], name: $0)[0] }
        #expect(names.indices.sorted { SortKey.less(keys[$0], keys[$1]) }.map { names[$0] } == ["c", "b0", "b", "ab", "a"])
    }

    /// `cloudlet-tool verify --deep` checks a composite index's keys against the stored values (and those against
    /// the records) like any index's; `dump --catalog` shows the index; `stats` reads the store.
    @Test func toolsHandleCompositeIndexes() async throws {
        let dir = TempDir("composite-tool")
        let path = dir.sub("store")
        var store = try await openStore(dir)
        let c = try store.container(testContainer)
        let db = try c.privateDatabase(user: "u")
        _ = try await db.modify((0..<60).map { i in
            var r = Record(recordType: "Photo", recordName: "p\(i)")
            r["photographer"] = .reference(Reference(recordName: "ph\(i % 4)"))
            if i % 7 != 0 { r["taken"] = .timestamp(Int64(i * 13 % 29)) }
            r["rating"] = .int64(Int64(i % 3))
            return .create(r)
        })
        try await c.importSchema(Self.text)
        await store.waitForIndexBuilds()
        _ = try await db.modify((60..<80).map { i in
            var r = Record(recordType: "Photo", recordName: "p\(i)")
            r["photographer"] = .reference(Reference(recordName: "ph\(i % 4)"))
            return .create(r)
        })
        try await store.close()

        let clean = try await tool("verify", "--data", path, "--deep")
        #expect(clean.code == 0, "\(clean)")
        let dump = try await tool("dump", "--data", path, "--catalog")
        #expect(dump.stdout.contains("INDEX byPhotographer (photographer, taken DESC)"), "\(dump)")
        let json = try await tool("dump", "--data", path, "--catalog", "--json").jsonLines()
        #expect(json.first?["compositeIndexes"]?["byRating"]?.stringValue == "byRating (rating, \"___createTime\" DESC, photographer)", "\(json)")
        let log = try await tool("dump", "--data", path, "--catalog", "--log")
        #expect(log.code == 0 && log.stdout.contains("byPhotographer"), "\(log)")
        let stats = try await tool("stats", "--data", path)
        #expect(stats.code == 0, "\(stats)")

        // Lose one key of the composite index, as a bug in maintenance would: verify names the index and record.
        store = try await openStore(dir)
        let (lost, definition) = try store.partitions[0].state.withLock { st -> ([UInt8], String) in
            let d = try #require(st.indexes.definitions.keys.first { $0.kind == .composite && $0.field == "byPhotographer" })
            let zone = try #require(st.keys.zoneKeys.first)
            var cursor = st.keys.indexCursor(try #require(st.indexes.subspace(d, zone: zone)).keyRange(.all))
            return (try #require(try cursor.next()).key, "\(d)")
        }
        try await store.close()
        try rewritePartitionDirectory(path) { state, memtable in memtable.delete(lost, sequence: state.lastLSN) }
        let bad = try await tool("verify", "--data", path, "--deep")
        #expect(bad.code != 0 && bad.stdout.contains("the \(definition) lacks record"), "\(bad)")
    }
}
