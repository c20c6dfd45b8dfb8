import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// `maxBytes` on change feeds, queries and lookups: a page stops before the record that would pass the budget,
/// always carries one record (a positive budget), and following tokens or markers yields every record exactly once.
@Suite struct ByteBudgetTests {
    let dir = TempDir("byte-budget")

    /// `count` records of about `size` bytes in each of `zones` (named z0, z1, …), saved in two batches per zone.
    func fill(_ db: Database, zones: Int, count: Int, size: Int) async throws -> [ZoneID: Set<String>] {
        var names: [ZoneID: Set<String>] = [:]
        for z in 0..<zones {
            let zone = ZoneID(zoneName: "z\(z)")
            try await db.createZone(zone)
            var ops: [RecordOperation] = []
            for i in 0..<count {
                // Sizes vary so that pages do not all end at the same record.
                let body = String(repeating: "b", count: size + (i * 997) % (size / 2))
                ops.append(.create(Record(recordType: "Blob", recordName: "z\(z)-r\(i)", zoneID: zone, fields: ["body": .string(body), "n": .int64(Int64(i))])))
            }
            _ = try await db.modify(Array(ops.prefix(count / 2)))
            _ = try await db.modify(Array(ops.dropFirst(count / 2)))
            names[ZoneID(zoneName: zone.zoneName, ownerName: "alice")] = Set(ops.map(\.recordID.recordName))
        }
        return names
    }

    static func size(_ r: Record) -> Int { RecordCodec.encode(r).count }

    @Test func zoneChangesEndBeforeTheBudgetAndResumeExactly() async throws {
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let names = try await fill(db, zones: 1, count: 30, size: 20_000)
        let zone = ZoneID(zoneName: "z0")
        let budget = 100_000
        var token: ChangeToken?
        var seen: [String] = []
        var pages = 0
        while true {
            let page = try await db.zoneChanges(zone, since: token, maxBytes: budget)
            pages += 1
            #expect(!page.changes.isEmpty || !page.moreComing)
            let sizes = page.changes.compactMap { if case .changed(let r) = $0 { Self.size(r) } else { nil } }
            #expect(sizes.reduce(0, +) <= budget || sizes.count == 1, "page \(pages): \(sizes)")
            #expect(page.byteCount == sizes.reduce(0, +), "byteCount counts the stored sizes")
            seen += page.changes.map(\.recordID.recordName)
            token = page.token
            if !page.moreComing { break }
        }
        #expect(seen.count == 30 && Set(seen) == names.values.first!, "\(seen.count) changes")
        #expect(pages >= 6, "30 records of 20–30 kB in pages of 100 kB: \(pages) pages")

        // A budget smaller than one record: one record per page, never none.
        let tiny = try await db.zoneChanges(zone, maxBytes: 1)
        #expect(tiny.changes.count == 1 && tiny.moreComing)
        // A budget of 0 only tells whether changes are waiting, and keeps the position.
        let none = try await db.zoneChanges(zone, since: tiny.token, maxBytes: 0)
        #expect(none.changes.isEmpty && none.moreComing)
        let resumed = try await db.zoneChanges(zone, since: none.token, resultsLimit: 1)
        #expect(resumed.changes.map(\.recordID.recordName) != tiny.changes.map(\.recordID.recordName))
        #expect(resumed.changes.count == 1)
        await expectError(.invalidArguments) { try await db.zoneChanges(zone, maxBytes: -1) }
        try await store.close()
    }

    @Test func queriesEndBeforeTheBudgetInEveryPlanAndAcrossZones() async throws {
        let store = try await openStore(dir, partitions: 4)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let names = try await fill(db, zones: 5, count: 24, size: 10_000)
        let all = names.values.reduce(into: Set<String>()) { $0.formUnion($1) }
        let budget = 64_000
        // A scan, a sorted walk and a sorted scan; in one zone and across all of them.
        let queries = [
            Query(recordType: "Blob"),
            Query(recordType: "Blob", sortDescriptors: [QuerySort("n", ascending: false)]),
            Query(recordType: "Blob", predicate: try Predicate(format: "n >= 3"), sortDescriptors: [QuerySort("n")]),
        ]
        for q in queries {
            for zoneWide in [false, true] {
                var cursor: QueryCursor?
                var seen: [String] = []
                for _ in 0..<500 {
                    let page = try await db.query(
                        q, zoneID: ZoneID(zoneName: "z0"), zoneWide: zoneWide, resultsLimit: 200, continuationMarker: cursor,
                        maxBytes: budget)
                    let bytes = page.records.map(Self.size).reduce(0, +)
                    #expect(!page.records.isEmpty)
                    #expect(bytes <= budget || page.records.count == 1, "\(q) zoneWide \(zoneWide): \(bytes) bytes")
                    seen += page.records.map(\.id.recordName)
                    cursor = page.cursor
                    if cursor == nil { break }
                }
                let want = zoneWide ? all : names[ZoneID(zoneName: "z0", ownerName: "alice")]!
                let expected = q.predicate == .all ? want : want.filter { Int($0.split(separator: "r").last!)! >= 3 }
                #expect(seen.count == expected.count, "\(q) zoneWide \(zoneWide): \(seen.count) of \(expected.count)")
                #expect(Set(seen) == expected, "\(q) zoneWide \(zoneWide)")
                // Without a budget the same query reads in pages of 200.
                let whole = try await db.query(q, zoneID: ZoneID(zoneName: "z0"), zoneWide: zoneWide, resultsLimit: 200)
                #expect(whole.records.count == min(200, expected.count))
            }
        }
        try await store.close()
    }

    @Test func lookupsPastTheBudgetAreLimitExceeded() async throws {
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        _ = try await fill(db, zones: 1, count: 10, size: 30_000)
        let ids = (0..<10).map { RecordID(recordName: "z0-r\($0)", zoneID: ZoneID(zoneName: "z0")) }
            + [RecordID(recordName: "missing", zoneID: ZoneID(zoneName: "z0"))]
        let results = try await db.records(for: ids, maxBytes: 100_000)
        let found = results.compactMap { try? $0.get() }
        #expect(found.count >= 2 && found.count <= 3, "\(found.count) records in 100 kB")
        #expect(found.map(Self.size).reduce(0, +) <= 100_000)
        for r in results.dropFirst(found.count).dropLast() {
            guard case .failure(let e) = r else { Issue.record("a record past the budget was read"); continue }
            #expect(e.code == .limitExceeded && e.message.contains("budget"), "\(e)")
        }
        if case .failure(let e) = results.last! { #expect(e.code == .unknownItem) } else { Issue.record("missing was found") }
        // The first record is read whatever the budget.
        let one = try await db.records(for: [ids[0]], maxBytes: 1)
        #expect((try? one[0].get()) != nil)
        try await store.close()
    }

    @Test func notificationWaitsWithoutANumberDoNotWaitOrTrap() async throws {
        let store = try await openStore(dir)
        for timeout in [Double.nan, -Double.nan, -1, -Double.infinity, 0] {
            let started = ContinuousClock.now
            let batch = await store.notifications(container: testContainer, user: "alice", after: nil, wait: timeout)
            #expect(batch.notifications.isEmpty)
            #expect(ContinuousClock.now - started < .seconds(5), "timeout \(timeout) waited")
        }
        // A position at the very end of the sequence space is read, not added to.
        let end = await store.notifications(container: testContainer, user: "alice", after: nil)
        let far = NotificationID(incarnation: end.next.incarnation, sequence: .max)
        let batch = await store.notifications(container: testContainer, user: "alice", after: far)
        #expect(batch.notifications.isEmpty && !batch.gap)
        try await store.close()
    }
}
