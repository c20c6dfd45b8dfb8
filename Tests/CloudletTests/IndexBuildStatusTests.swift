import CloudletCore
import CloudletTestSupport
import Synchronization
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

    @Test func indexBuildsCountTheirProgressChunkByChunk() async throws {
        let dir = TempDir("index-build-progress")
        let store = try await openStore(dir)
        let container = try store.container(testContainer)
        let db = try container.privateDatabase(user: "u")
        let count = IndexBuilder.chunkSize * 2 + 88
        for start in stride(from: 0, to: count, by: 200) {
            _ = try await db.modify(
                (start..<min(start + 200, count)).map { .create(Record(recordType: "Book", recordName: "b\($0)", fields: ["price": .int64(Int64($0))])) })
        }
        // Queued: building, no progress yet.
        store.indexBuilder.pause()
        try await container.importSchema("DEFINE SCHEMA RECORD TYPE Book (price INT64 SORTABLE);")
        let queued = container.indexBuilds()
        #expect(queued.map(\.field) == ["price"] && queued.first?.recordsTotal == nil && queued.first?.fractionDone == nil)
        // Running: what the console sees after each chunk.
        let seen = Mutex<[IndexBuildStatus]>([])
        store.indexBuilder.chunkMerged.withLock {
            $0 = { _ in seen.withLock { $0 += container.indexBuilds() } }
        }
        store.indexBuilder.resume()
        await store.waitForIndexBuilds()
        let chunk = IndexBuilder.chunkSize
        #expect(seen.withLock { $0 }.map(\.recordsDone) == [chunk, 2 * chunk, count])
        #expect(seen.withLock { $0 }.allSatisfy { $0.recordsTotal == count && $0.field == "price" })
        #expect(container.indexBuilds().isEmpty)
        try await store.close()
    }
}
