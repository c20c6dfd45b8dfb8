import Cloudlet
import CloudletClient
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

/// Application code written against ``CloudletDatabase`` runs unchanged against the embedded engine and against a
/// server through ``CloudletClient``, and sees the same outcomes: results, change tags honoured, errors with the
/// same codes, conflicts carrying the server's record, queries paged by cursor, change feeds, subscriptions.
@Suite struct SameCodeTests {
    /// One app's session. Returns what the app observed, in order, with the zone's name replaced by `ZONE` so that
    /// two runs in different zones of the same store compare equal.
    static func scenario(_ db: some CloudletDatabase, zoneName: String, scratch: String) async throws -> [String] {
        var seen: [String] = []
        func note(_ s: String) { seen.append(s.replacingOccurrences(of: zoneName, with: "ZONE")) }
        let zone = ZoneID(zoneName: zoneName)

        // A lookup in a zone that does not exist yet.
        let missing = try await db.records(for: [RecordID(recordName: "x", zoneID: zone)])
        note("lookup in missing zone: \(missing[0].errorCode)")

        let created = try await db.createZone(zone)
        note("zone \(created.id.zoneName) atomic \(created.capabilities.contains(.atomic))")
        note("zones include it: \(try await db.zones().contains { $0.id.zoneName == zoneName })")
        let start = try await db.zoneChanges(zone)

        // Create ten notes, one batch.
        let notes = (0..<10).map { i in
            Record(recordType: "Note", recordName: "note-\(i)", zoneID: zone, fields: ["title": .string("title \(9 - i)"), "rank": .int64(Int64(i))])
        }
        let results = try await db.modify(notes.map { .create($0) })
        note("created \(results.compactMap(\.record).count) of \(results.count)")
        let first = try #require(results[0].record)
        note("saved fields \(first.fields["title"]!) \(first.fields["rank"]!), tag set \(first.changeTag != nil)")

        // Creating one again: EXISTS per record, the others unaffected (non-atomic).
        let again = try await db.modify([.create(notes[0]), .forceUpdate(notes[1])], atomic: false)
        note("create again: \(again[0].error?.code.description ?? "ok"), forceUpdate: \(again[1].record != nil)")

        // Update with the current tag, then with the stale one: CONFLICT with the server's record.
        var edit = first
        edit.fields["title"] = .string("edited")
        let edited = try await db.save(edit)
        note("edited \(edited.fields["title"]!) tag changed \(edited.changeTag != first.changeTag)")
        var stale = first
        stale.fields["title"] = .string("lost edit")
        do {
            _ = try await db.save(stale)
            note("stale save succeeded")
        } catch let e as CloudletError {
            note("stale save: \(e.code), server has \(e.serverRecord?.fields["title"].map { "\($0)" } ?? "nothing")")
        }

        // A query sorted by rank, three per page, following cursors; and a count.
        var names: [String] = []
        var cursor: QueryCursor?
        var pages = 0
        repeat {
            let page = try await db.query(
                Query(recordType: "Note", predicate: .comparison(Comparison("rank", .greaterThanOrEquals, .int64(2))),
                      sortDescriptors: [.descending("rank")]),
                zoneID: zone, resultsLimit: 3, continuationMarker: cursor)
            names += page.records.map(\.recordName)
            cursor = page.cursor
            pages += 1
        } while cursor != nil && pages < 10
        note("query: \(names.joined(separator: ",")) in \(pages) pages")
        note("count rank < 5: \(try await db.count(Query(recordType: "Note", predicate: .comparison(Comparison("rank", .lessThan, .int64(5)))), zoneID: zone))")

        // Delete one; lookups report it missing; the change feed has the changes since the start.
        try await db.deleteRecord(RecordID(recordName: "note-3", zoneID: zone))
        let afterDelete = try await db.records(for: [RecordID(recordName: "note-3", zoneID: zone), first.id, first.id])
        note("after delete: \(afterDelete.map(\.errorCode).joined(separator: ","))")
        let changes = try await db.zoneChanges(zone, since: start.token)
        let changed = changes.changes.map { c -> String in
            switch c {
            case .changed(let r): "+\(r.recordName)"
            case .deleted(let id, let type): "-\(id.recordName):\(type)"
            }
        }
        note("changes: \(changed.sorted().joined(separator: " ")) more \(changes.moreComing)")
        let none = try await db.zoneChanges(zone, since: changes.token)
        note("then: \(none.changes.count) changes")
        let dbChanges = try await db.databaseChanges()
        note("database changes name the zone: \(dbChanges.changedZones.contains { $0.zoneName == zoneName })")

        // Subscriptions.
        let sub = Subscription(
            id: "sub-\(zoneName)", kind: .query(recordType: "Note", predicate: .all, zoneID: zone), firesOn: [.create])
        _ = try await db.saveSubscription(sub)
        _ = try await db.saveSubscription(sub)  // saving again replaces it
        note("subscription listed: \(try await db.subscriptions().contains { $0.id == sub.id })")
        note("subscription fires on: \(try await db.subscription(sub.id).firesOn.rawValue)")
        try await db.deleteSubscription(sub.id)
        do {
            _ = try await db.subscription(sub.id)
            note("deleted subscription found")
        } catch let e as CloudletError { note("deleted subscription: \(e.code)") }

        // Assets: one from bytes, a list with one from a file; read back whole and into a file.
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let source = scratch + "/source.bin"
        try Data(bytes.reversed()).write(to: URL(fileURLWithPath: source))
        var photo = Record(recordType: "Photo", recordName: "p1", zoneID: zone)
        photo.fields["image"] = .asset(AssetReference(data: bytes))
        photo.fields["extras"] = .list(.asset, [.asset(AssetReference(contentsOfFile: source)), .asset(AssetReference(data: [1, 2, 3]))])
        let savedPhoto = try await db.save(photo)
        let fetched = try await db.record(for: savedPhoto.id)
        guard case .asset(let image)? = fetched.fields["image"], case .list(_, let extras)? = fetched.fields["extras"],
            case .asset(let fromFile) = extras[0]
        else { throw CloudletError(.internalError, "photo fields came back as \(fetched.fields)") }
        note("asset sizes \(image.size) \(fromFile.size) \(extras.count), checksum \(image.fileChecksum.prefix(12))")
        note("asset bytes match: \(try await db.assetData(image) == bytes) \(try await db.assetData(fromFile) == bytes.reversed())")
        let copy = scratch + "/copy.bin"
        try await db.downloadAsset(image, to: copy)
        note("downloaded file matches: \(try Data(contentsOf: URL(fileURLWithPath: copy)) == Data(bytes))")
        // A record read back and saved again keeps its assets without sending them again.
        var resave = fetched
        resave.fields["caption"] = .string("same image")
        let resaved = try await db.save(resave)
        note("resaved keeps asset: \(resaved.fields["image"] == .asset(AssetReference(fileChecksum: image.fileChecksum, size: image.size)))")

        // A bad argument is the same error through both.
        do {
            _ = try await db.query(Query(recordType: "Note"), zoneID: zone, resultsLimit: 0)
            note("resultsLimit 0 accepted")
        } catch let e as CloudletError { note("resultsLimit 0: \(e.code)") }

        try await db.deleteZone(zone)
        do {
            _ = try await db.zone(for: zone)
            note("deleted zone found")
        } catch let e as CloudletError { note("deleted zone: \(e.code)") }
        return seen
    }

    @Test func oneScenarioGivesTheSameOutcomesEmbeddedAndThroughTheServer() async throws {
        try await withFixture { f in
            let scratch = TempDir("same-code")
            let embedded = try await Self.scenario(try f.embedded(), zoneName: "embedded-zone", scratch: scratch.path)
            let remote = try await Self.scenario(f.remote(), zoneName: "remote-zone", scratch: scratch.path)
            #expect(embedded == remote)
            if embedded != remote {
                for (e, r) in zip(embedded, remote) where e != r { Issue.record("embedded: \(e)\nremote:   \(r)") }
            }
            // And what both saw is what the scenario expects.
            #expect(remote.contains("lookup in missing zone: zoneNotFound"))
            #expect(remote.contains("created 10 of 10"))
            #expect(remote.contains("create again: recordExists, forceUpdate: true"))
            #expect(remote.contains(#"stale save: serverRecordChanged, server has string("edited")"#), "\(remote)")
            #expect(remote.contains("query: note-9,note-8,note-7,note-6,note-5,note-4,note-3,note-2 in 3 pages"), "\(remote)")
            #expect(remote.contains("count rank < 5: 5"), "\(remote)")
            #expect(remote.contains("after delete: unknownItem,ok,ok"), "\(remote)")
            #expect(remote.contains("then: 0 changes"))
            #expect(remote.contains("subscription listed: true"))
            #expect(remote.contains("deleted subscription: unknownItem"), "\(remote)")
            #expect(remote.contains("resultsLimit 0: invalidArguments"), "\(remote)")
            #expect(remote.contains("asset bytes match: true true"), "\(remote)")
            #expect(remote.contains("downloaded file matches: true"), "\(remote)")
            #expect(remote.contains("resaved keeps asset: true"), "\(remote)")
            #expect(remote.contains("deleted zone: zoneNotFound"), "\(remote)")
        }
    }
}

extension Result where Failure == CloudletError {
    /// "ok", or the error's code.
    var errorCode: String {
        switch self {
        case .success: "ok"
        case .failure(let e): e.code.description
        }
    }
}
