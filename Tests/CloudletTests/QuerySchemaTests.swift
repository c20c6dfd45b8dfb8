import CloudletWire
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Index flags across environments: production refuses what is not indexed (naming the field), deploy carries
/// flags to production additively, reset brings development back to production's.
@Suite struct QuerySchemaTests {
    func book(_ i: Int) -> Record {
        Record(
            recordType: "Book", recordName: "b\(i)",
            fields: [
                "title": .string(i % 2 == 0 ? "Coffee and code" : "Tea time"), "kind": .string(i % 3 == 0 ? "novel" : "manual"),
                "price": .int64(Int64(i)),
            ])
    }

    /// A store with Book deployed to production (types and fields, no index flags) and 20 books in each environment.
    func setUp(_ dir: TempDir) async throws -> (CloudletStore, Container, Database, Database) {
        let store = try await openStore(dir)
        let container = try store.container(testContainer)
        let dev = try container.privateDatabase(user: "u")
        _ = try await dev.modify((0..<20).map { .create(book($0)) })
        try await container.deploySchema()
        let prod = try container.privateDatabase(user: "u", environment: .production)
        _ = try await prod.modify((0..<20).map { .create(book($0)) })
        return (store, container, dev, prod)
    }

    @Test func productionRefusesFieldsWithoutTheIndexTheyNeedNamingThem() async throws {
        let dir = TempDir("prod-refuses")
        let (store, _, _, prod) = try await setUp(dir)
        let cases: [(Query, String)] = [
            (try Query(recordType: "Book", format: "kind == 'novel'"), "Field 'kind' is not marked queryable"),
            (try Query(recordType: "Book", format: "kind BEGINSWITH 'n'"), "Field 'kind' is not marked queryable"),
            (try Query(recordType: "Book", format: "price < 5"), "Field 'price' is not marked sortable"),
            (try Query(recordType: "Book", format: "self CONTAINS 'coffee'"), "' is not marked searchable"),
            (try Query(recordType: "Book", format: "title CONTAINS 'x'"), "Field 'title' is not marked queryable"),
            (Query(recordType: "Book", predicate: .all), "Field 'recordName' is not marked queryable"),
            (
                Query(recordType: "Book", predicate: .comparison(Comparison("kind", .equals, "x")), sortDescriptors: [.ascending("price")]),
                "Field 'kind' is not marked queryable"
            ),
            (try Query(recordType: "Book", format: "nope == 1"), "field 'nope' is not in the production schema"),
            (Query(recordType: "Nope"), "record type 'Nope' is not in the production schema"),
        ]
        for (q, message) in cases {
            let e = await expectError(.invalidArguments) { try await prod.query(q) }
            #expect(e?.message.contains(message) == true, "\(q.predicate): \(e?.message ?? "")")
            #expect(e?.code.serverErrorCode == "BAD_REQUEST")
        }
        let sortOnly = await expectError(.invalidArguments) {
            try await prod.query(try Query(recordType: "Book", format: "kind == 'x'", sortDescriptors: [.descending("price")]))
        }
        #expect(sortOnly?.message.contains("'kind'") == true)
        // Nothing was added to production by trying.
        #expect(try store.container(testContainer).schema(environment: .production).first!.indexes.isEmpty)
        try await store.close()
    }

    @Test func deployCarriesIndexFlagsAndProductionBuildsThemOverItsRecords() async throws {
        let dir = TempDir("prod-deploy")
        let (store, container, dev, prod) = try await setUp(dir)
        // Development gets its indexes just in time from queries …
        _ = try await dev.query(try Query(recordType: "Book", format: "kind == 'novel' AND price >= 3"))
        _ = try await dev.query(Query(recordType: "Book", sortDescriptors: [.descending("price")]))
        let devBook = container.schema(environment: .development).first { $0.name == "Book" }!
        #expect(devBook.indexes == ["kind": .queryable, "price": .sortable, "recordName": .queryable])
        // … and production only when deployed. Commit the deployment without starting the builds, to see the
        // query while the index is still building.
        let (_, version) = try await store.catalog.commit(waitingForRoom: { st in (try st.schema.deployment(container: testContainer), ()) })
        try await store.catalog.waitDurable(version)
        _ = try await store.partitions[0].commit(waitingForRoom: { st, _ in
            (IndexReconciler.mutations(schema: store.catalog.snapshot().schema, indexes: st.indexes), ())
        })
        let q = try Query(recordType: "Book", format: "kind == 'novel' AND price >= 3")
        let building = await expectError(.serviceUnavailable) { try await prod.query(q) }
        #expect(building?.message.contains("still being built") == true)
        #expect(building?.code.serverErrorCode == "TRY_AGAIN_LATER")
        store.startIndexBuilds()
        await store.waitForIndexBuilds()
        let page = try await prod.query(q)
        #expect(page.records.map(\.recordName).sorted() == ["b12", "b15", "b18", "b3", "b6", "b9"])
        #expect(page.plan.zones[0].usesIndex)
        let sorted = try await prod.query(Query(recordType: "Book", sortDescriptors: [.descending("price")]), resultsLimit: 3)
        #expect(sorted.records.map(\.recordName) == ["b19", "b18", "b17"])
        #expect(container.schema(environment: .production).first!.indexes == devBook.indexes)
        #expect(try await container.deploySchema() == 0, "deploying again adds nothing")
        try await store.close()
    }

    @Test func deployIsAdditiveAndRefusesToDropWhatProductionHas() throws {
        var catalog = SchemaCatalog()
        let dev = SchemaKey(container: testContainer, environment: .development)
        let prod = SchemaKey(container: testContainer, environment: .production)
        catalog.types[dev] = ["Book": RecordTypeSchema(name: "Book", fields: ["kind": FieldType(.string)], indexes: ["kind": .queryable])]
        catalog.types[prod] = [
            "Book": RecordTypeSchema(name: "Book", fields: ["kind": FieldType(.string)], indexes: ["kind": [.queryable, .sortable]])
        ]
        #expect { try catalog.deployment(container: testContainer) } throws: { e in
            (e as? CloudletError)?.message.contains("field 'kind' of record type 'Book' is SORTABLE in production") == true
        }
        catalog.types[prod] = ["Book": RecordTypeSchema(name: "Book", fields: ["kind": FieldType(.string), "old": FieldType(.int64)])]
        #expect { try catalog.deployment(container: testContainer) } throws: { e in
            (e as? CloudletError)?.message.contains("field 'old' of record type 'Book' is in production but not in development") == true
        }
        catalog.types[prod] = ["Gone": RecordTypeSchema(name: "Gone")]
        #expect { try catalog.deployment(container: testContainer) } throws: { e in
            (e as? CloudletError)?.message.contains("record type 'Gone' is in production but not in development") == true
        }
        catalog.types[prod] = ["Book": RecordTypeSchema(name: "Book", fields: ["kind": FieldType(.int64)])]
        #expect { try catalog.deployment(container: testContainer) } throws: { e in
            (e as? CloudletError)?.message.contains("is INT64 in production but STRING in development") == true
        }
        catalog.types[prod] = ["Book": RecordTypeSchema(name: "Book", fields: ["kind": FieldType(.string)])]
        let m = try catalog.deployment(container: testContainer)
        #expect(m.count == 1)
        for x in m { catalog.apply(x) }
        #expect(catalog.types[prod]!["Book"]!.indexes == ["kind": .queryable])
    }

    @Test func resetBringsDevelopmentBackToProductionAndDropsItsIndexes() async throws {
        let dir = TempDir("dev-reset")
        let (store, container, dev, _) = try await setUp(dir)
        try await container.addIndexes([.queryable, .sortable], recordType: "Book", field: "price")
        await store.waitForIndexBuilds()
        func defined() -> [String] {
            store.partitions[0].state.withLock { st in
                st.indexes.definitions.keys.filter { $0.schema.environment == .development }.map { "\($0.kind) \($0.field)" }.sorted()
            }
        }
        #expect(defined() == ["equality price", "ordered price"])
        try await container.resetDevelopmentSchema()
        #expect(container.schema(environment: .development) == container.schema(environment: .production))
        #expect(defined().isEmpty, "development-only indexes are dropped")
        // Records are kept, and queries add the index again just in time.
        let again = try await dev.query(try Query(recordType: "Book", format: "price == 7"))
        #expect(again.records.map(\.recordName) == ["b7"])
        #expect(again.plan.notes.contains { $0.contains("added QUERYABLE to 'price'") })
        try await store.close()
    }

    @Test func flagsMustFitTheFieldType() async throws {
        let dir = TempDir("flags-fit")
        let (store, container, _, _) = try await setUp(dir)
        let e1 = await expectError(.invalidArguments) { try await container.addIndexes(.searchable, recordType: "Book", field: "price") }
        #expect(e1?.message.contains("only STRING and LIST<STRING> fields can be SEARCHABLE") == true)
        let e2 = await expectError(.invalidArguments) { try await container.addIndexes(.queryable, recordType: "Book", field: "nope") }
        #expect(e2?.message.contains("field 'nope'") == true)
        let e3 = await expectError(.invalidArguments) { try await container.addIndexes(.queryable, recordType: "Nope", field: "x") }
        #expect(e3?.message.contains("record type 'Nope'") == true)
        try await container.addIndexes(.sortable, recordType: "Book", field: "creationDate")
        #expect(container.schema(environment: .development).first!.indexes["createdTimestamp"] == .sortable)
        try await store.close()
    }

    /// A comparator that no value of the field's type can match (NEAR, BEGINS_WITH or CONTAINS_ALL_TOKENS on an
    /// INT64 …) is a bad request naming the comparator and the field — in either environment, for query, count and
    /// explain, also inside OR and NOT — rather than an empty result; one that fits the type still runs.
    @Test(arguments: [
        Comparison("price", .near, .location(Location(latitude: 1, longitude: 2)), distance: 10),
        Comparison("price", .beginsWith, "1"),
        Comparison("price", .containsAllTokens, "one two"),
        Comparison("price", .containsAnyTokens, "one"),
        Comparison("title", .near, .location(Location(latitude: 1, longitude: 2)), distance: 10),
        Comparison("price", .notBeginsWith, "1"),
        Comparison("createdTimestamp", .listMemberBeginsWith, "1"),
    ])
    func comparatorThatCannotApplyToTheFieldTypeIsAnErrorNamingFieldAndComparator(c: Comparison) async throws {
        let dir = TempDir("query-type-mismatch")
        let (store, _, dev, prod) = try await setUp(dir)
        let predicates: [Predicate] = [
            .comparison(c), .or([.comparison(Comparison("kind", .equals, "novel")), .comparison(c)]),
        ]
        for db in [dev, prod] {
            for p in predicates {
                let q = Query(recordType: "Book", predicate: p)
                for call in ["query", "count", "explain"] {
                    let e = await expectError(.invalidArguments) {
                        switch call {
                        case "query": _ = try await db.query(q)
                        case "count": _ = try await db.count(q)
                        default: _ = try await db.explain(q)
                        }
                    }
                    let message = e?.message ?? ""
                    #expect(message.contains(c.comparator.rawValue) && message.contains("'\(c.field)'"), "\(call): \(message)")
                    #expect(e?.code.serverErrorCode == "BAD_REQUEST")
                }
            }
        }
        // Development added no index for the refused comparisons; a comparator that fits still answers.
        #expect(try store.container(testContainer).schema(environment: .development).first!.indexes["price"] == nil)
        let fits = try await dev.query(try Query(recordType: "Book", format: "title BEGINSWITH 'Tea'"))
        #expect(fits.records.count == 10)
        try await store.close()
    }
}
