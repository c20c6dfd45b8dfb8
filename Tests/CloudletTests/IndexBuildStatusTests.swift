import CloudletCore
import CloudletTestSupport
import Testing

@testable import Cloudlet

/// `Container.indexesBuilding(environment:)`, which the console's schema page shows: the fields whose indexes are
/// still being built over existing records, until the builds finish.
@Suite struct IndexBuildStatusTests {
    @Test func indexesBuildingListsTheFieldsUntilTheirBuildsFinish() async throws {
        let dir = TempDir("index-build-status")
        let store = try await openStore(dir)
        let container = try store.container(testContainer)
        let db = try container.privateDatabase(user: "u")
        _ = try await db.modify(
            (0..<50).map { .create(Record(recordType: "Book", recordName: "b\($0)", fields: ["price": .int64(Int64($0)), "title": .string("t")])) })
        #expect(container.indexesBuilding().isEmpty)
        // Held builds: the new indexes stay "building" until the builder runs.
        store.indexBuilder.pause()
        try await container.importSchema("DEFINE SCHEMA RECORD TYPE Book (price INT64 SORTABLE, title STRING QUERYABLE);")
        let pending = container.indexesBuilding().map { "\($0.recordType).\($0.field)" }
        #expect(pending == ["Book.price", "Book.title"])
        #expect(container.indexesBuilding(environment: .production).isEmpty)
        store.indexBuilder.resume()
        await store.waitForIndexBuilds()
        #expect(container.indexesBuilding().isEmpty)
        try await store.close()
    }
}
