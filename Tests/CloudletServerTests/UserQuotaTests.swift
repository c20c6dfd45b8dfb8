import Cloudlet
import CloudletCore
import CloudletTestSupport
import CloudletWire
import Testing

@testable import CloudletServer

/// The per-user storage quota's bookkeeping of requests in flight (`UserQuota`): the HTTP behaviour is in
/// LimitsTests and AssetQuotaTests.
@Suite struct UserQuotaTests {
    static let container = "iCloud.com.example.quota"

    func record(_ name: String, bytes: Int) -> RecordOperation {
        var r = Record(recordType: "Note", recordName: name)
        r["text"] = .string(String(repeating: "x", count: bytes))
        return .create(r)
    }

    @Test func concurrentSavesThatEachFitCannotTogetherPassTheQuota() async throws {
        let dir = try TempDir()
        let store = try await CloudletStore.open(at: dir.sub("store"), configuration: StoreConfiguration(durability: .os))
        let container = try store.container(Self.container)
        let db = try container.privateDatabase(user: "_alice")
        let quota = UserQuota(bytes: 3_000)
        // Two requests are admitted one after the other before either commits (as two workers would): each fits
        // alone in the empty database; together they do not.
        let first = try quota.check([record("a", bytes: 1_800)], in: db, container: container)
        #expect(first["_alice"] ?? 0 > 1_800)
        #expect(throws: APIError.self) { try quota.check([self.record("b", bytes: 1_800)], in: db, container: container) }
        // The first one fails: what it reserved is given back, and the second fits again.
        quota.finished(first, committed: false)
        let second = try quota.check([record("b", bytes: 1_800)], in: db, container: container)
        _ = try await db.modify([record("b", bytes: 1_800)], atomic: true)
        quota.finished(second, committed: true)
        // Committed, it counts (from the kept bound, without measuring again) against the next one.
        #expect(throws: APIError.self) { try quota.check([self.record("c", bytes: 1_800)], in: db, container: container) }
        let small = try quota.check([record("d", bytes: 100)], in: db, container: container)
        quota.finished(small, committed: false)
        try await store.close()
    }
}
