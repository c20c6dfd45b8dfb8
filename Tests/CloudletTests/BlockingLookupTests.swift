import CloudletConcurrency
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// ``Database/recordsBlocking(for:maxBytes:)``, the front end's lookup without an async hop, answers exactly as
/// ``Database/records(for:maxBytes:)`` does: the same records and the same errors, for every kind of ID.
@Suite struct BlockingLookupTests {
    let dir = TempDir("blocking-lookup")

    /// Runs `body` on a thread of its own (a thread that may block, as a front-end worker is) and returns its result.
    func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { c in
            Thread { c.resume(with: Result { try body() }) }.start()
        }
    }

    /// A comparable form of a result: the record's name, tag and fields, or the error's code and message.
    static func describe(_ r: Result<Record, CloudletError>) -> String {
        switch r {
        case .success(let rec): "\(rec.recordName) \(rec.changeTag ?? "-") \(rec.fields.sorted { $0.key < $1.key })"
        case .failure(let e): "\(e.code) \(e.message)"
        }
    }

    @Test(arguments: [true, false])
    func blockingLookupGivesTheAsyncLookupsAnswers(cached: Bool) async throws {
        var config = StoreConfiguration(durability: .fsync)
        if !cached { config.recordCacheSize = 0 }  // every read from the log
        let store = try await CloudletStore.open(at: dir.sub("store-\(cached)"), configuration: config)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let trips = ZoneID(zoneName: "Trips")
        try await db.createZone(trips)
        _ = try await db.modify([
            .create(note("a", title: "first")), .create(note("b")), .create(note("gone")),
            .create(note("t1", zone: trips, title: String(repeating: "x", count: 5_000))), .create(note("t2", zone: trips)),
        ])
        _ = try await db.modify([.forceDelete(RecordID(recordName: "gone"))])
        let ids = [
            RecordID(recordName: "a"), RecordID(recordName: "missing"), RecordID(recordName: "gone"),
            RecordID(recordName: "t1", zoneID: trips), RecordID(recordName: "t2", zoneID: trips),
            RecordID(recordName: "b"),
            RecordID(recordName: "x", zoneID: ZoneID(zoneName: "NoSuchZone")),
            RecordID(recordName: "x", zoneID: ZoneID(zoneName: "Trips", ownerName: "bob")),
            RecordID(recordName: "x", zoneID: ZoneID(zoneName: "")),
        ]
        for budget in [nil, 1_000] as [Int?] {
            let async = try await db.records(for: ids, maxBytes: budget).map(Self.describe)
            let blocking = try #require(try await onThread { try db.recordsBlocking(for: ids, maxBytes: budget) }).map(Self.describe)
            #expect(blocking == async, "budget \(budget.map(String.init) ?? "none")")
            // The answers are the ones a lookup must give, not just the same ones.
            #expect(blocking[0].hasPrefix("a ") && blocking[5].hasPrefix("b ") || budget != nil, "\(blocking)")
            #expect(blocking[1].hasPrefix("unknownItem") && blocking[2].hasPrefix("unknownItem"), "\(blocking)")
            #expect(blocking[6].hasPrefix("zoneNotFound") && blocking[7].hasPrefix("zoneNotFound"), "\(blocking)")
            if budget != nil { #expect(blocking.contains { $0.hasPrefix("limitExceeded") }, "\(blocking)") }
        }

        // Another user's private database: every ID is refused, the same way.
        let other = Database(id: db.id, access: .user("mallory"), store: store)
        let refusedAsync = try await other.records(for: ids, maxBytes: nil).map(Self.describe)
        let refused = try #require(try await onThread { try other.recordsBlocking(for: ids, maxBytes: nil) }).map(Self.describe)
        #expect(refused == refusedAsync && refused.allSatisfy { $0.hasPrefix("permissionFailure") }, "\(refused)")

        // The shared database's share checks are async: no blocking answer, the caller takes the async path.
        let shared = try store.container(testContainer).sharedDatabase(user: "alice")
        #expect(try await onThread { try shared.recordsBlocking(for: ids, maxBytes: nil) } == nil)
        try await store.close()
    }
}
