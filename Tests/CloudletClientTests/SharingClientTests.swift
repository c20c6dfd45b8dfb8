import Cloudlet
import CloudletClient
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

/// Sharing written against ``CloudletDatabase`` runs the same embedded and through the server with the client.
@Suite struct SharingClientTests {
    /// alice shares a trip with bob, bob resolves, accepts, edits it and adds a child; alice ends the share. Returns
    /// what both observed, with the zone's name replaced by `ZONE`.
    static func scenario(
        alice: some CloudletDatabase, bobPublic: some CloudletDatabase, bobShared: some CloudletDatabase, aliceName: String,
        bobName: String, zoneName: String
    ) async throws -> [String] {
        var seen: [String] = []
        func note(_ s: String) { seen.append(s.replacingOccurrences(of: zoneName, with: "ZONE")) }
        let zone = ZoneID(zoneName: zoneName, ownerName: aliceName)
        _ = try await alice.createZone(zone)
        let trip = try await alice.save(Record(recordType: "Trip", recordName: "t1", zoneID: zone, fields: ["title": "Lisbon"]))
        let share = try await alice.share(root: trip.id, participants: [Share.Participant(userRecordName: bobName, permission: .readWrite)])
        note("share \(share.id.recordName) of \(share.rootRecordName ?? "-") in \(share.id.zoneID.zoneName), guid \(share.shortGUID != nil)")
        note("participants \(share.participants.map { "\($0.userRecordName == bobName ? "bob" : "?") \($0.permission) \($0.acceptance)" })")
        let guid = try #require(share.shortGUID)

        let resolved = try await bobPublic.resolveShare(shortGUID: guid, fetchRootRecord: true)
        note("resolved: \(resolved.callerParticipant?.acceptance.rawValue ?? "-"), root \(resolved.rootRecord?.fields["title"].map { "\($0)" } ?? "-")")
        note("owner is alice: \(resolved.share.owner == aliceName)")
        do {
            _ = try await bobShared.record(for: trip.id)
            note("read before accepting")
        } catch let e as CloudletError { note("before accepting: \(e.code)") }
        let accepted = try await bobPublic.acceptShare(shortGUID: guid)
        note("accepted: \(accepted.callerParticipant?.acceptance.rawValue ?? "-")")

        note("bob's zones: \(try await bobShared.zones().map { "\($0.id.zoneName) of \($0.id.ownerName == aliceName ? "alice" : "?")" })")
        var mine = try await bobShared.record(for: trip.id)
        mine["title"] = "Lisbon, 3 nights"
        _ = try await bobShared.save(mine)
        var day = Record(recordType: "Day", recordName: "d1", zoneID: zone, fields: ["plan": "Alfama"])
        day.parent = trip.id
        let saved = try await bobShared.save(day)
        note("bob's child: parent \(saved.parent?.recordName ?? "-")")
        note("bob sees: \(try await bobShared.query(Query(recordType: "Day"), zoneID: zone).records.map(\.recordName))")
        note("alice reads: \(try await alice.record(for: trip.id).fields["title"]!), day by bob \(try await alice.record(for: day.id).created?.userRecordName == bobName)")
        note("alice's share: \(try await alice.share(for: share.id).participants.map(\.acceptance.rawValue))")
        // The share is a record of alice's zone feed, which reads back as the share.
        let feed = try await alice.zoneChanges(zone, since: nil, resultsLimit: nil, desiredKeys: nil, desiredRecordTypes: nil)
        let shareRecords = feed.changes.compactMap { c -> Record? in if case .changed(let r) = c, r.recordType == Share.recordType { r } else { nil } }
        let fromFeed = try shareRecords.map { try Share(record: $0) }
        note("feed share: \(fromFeed.map { "\($0.id.recordName) \($0.participants.map(\.acceptance.rawValue))" }), same as share(for:): \(fromFeed == [try await alice.share(for: share.id)])")
        // Looked up or queried by its name, the share's record reads back as the share too (participants, permissions,
        // short GUID), for the owner and for a participant.
        let current = try await alice.share(for: share.id)
        let looked = try await alice.records(for: [share.id])[0].get()
        let queried = try await alice.query(Query(recordType: Share.recordType), zoneID: zone).records
        note("lookup share: \(try Share(record: looked) == current), query shares: \(try queried.map(Share.init(record:)) == [current])")
        let bobsShare = try Share(record: try await bobShared.records(for: [share.id])[0].get())
        let bobsQuery = try await bobShared.query(Query(recordType: Share.recordType), zoneID: zone).records
        note("bob's lookup: \(bobsShare.participants.map { "\($0.permission.rawValue) \($0.acceptance.rawValue)" }) \(bobsShare.publicPermission.rawValue), guid \(bobsShare.shortGUID == guid), query \(try bobsQuery.map(Share.init(record:)) == [bobsShare])")

        try await alice.deleteShare(share.id)
        note("after alice ends it, bob's zones: \(try await bobShared.zones().count)")
        do {
            _ = try await alice.share(for: share.id)
            note("share still there")
        } catch let e as CloudletError { note("share lookup: \(e.code)") }
        return seen
    }

    @Test func sharingGivesTheSameOutcomesEmbeddedAndThroughTheServer() async throws {
        try await withFixture { f in
            let (aliceName, bobName) = (f.alice.user.userRecordName, f.bob.user.userRecordName)
            let c = try f.store.container(ClientFixture.container)
            let embedded = try await Self.scenario(
                alice: try c.privateDatabase(user: aliceName), bobPublic: c.publicDatabase(user: bobName),
                bobShared: try c.sharedDatabase(user: bobName), aliceName: aliceName, bobName: bobName, zoneName: "embedded-trips")
            let bob = f.client(token: f.bob.token).container(ClientFixture.container)
            let remote = try await Self.scenario(
                alice: f.remote(), bobPublic: bob.database(.public), bobShared: bob.database(.shared), aliceName: aliceName,
                bobName: bobName, zoneName: "remote-trips")
            #expect(embedded == remote)
            for (e, r) in zip(embedded, remote) where e != r { Issue.record("embedded: \(e)\nremote:   \(r)") }
            #expect(remote.contains("resolved: PENDING, root string(\"Lisbon\")"), "\(remote)")
            #expect(remote.contains("accepted: ACCEPTED"))
            #expect(remote.contains("bob sees: [\"d1\"]"))
            #expect(remote.contains("after alice ends it, bob's zones: 0"))
            #expect(remote.contains("share lookup: unknownItem"))
            #expect(remote.contains("lookup share: true, query shares: true"), "\(remote)")
            #expect(remote.contains("bob's lookup: [\"READ_WRITE ACCEPTED\"] NONE, guid true, query true"), "\(remote)")
            #expect(remote.contains("feed share: [\"share-t1 [\\\"ACCEPTED\\\"]\"], same as share(for:): true"), "\(remote)")
        }
    }
}
