import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// The sharing seed flow end to end over HTTP, the server stopped and its store reopened between every step: alice
/// shares a trip, bob resolves and accepts it, sees and edits it in his shared database, alice's change feed shows his
/// edit, alice stops sharing and bob no longer sees it.
@Suite struct SharingFlowTests {
    /// A server over a store in `dir` that can be restarted on the same store.
    final class Restartable: @unchecked Sendable {  // used by one test task at a time
        let dir: TempDir
        var store: CloudletStore
        var server: Server

        init(_ dir: TempDir) async throws {
            self.dir = dir
            store = try await CloudletStore.open(at: dir.sub("store"), configuration: StoreConfiguration(durability: .os))
            server = try Server(store: store, configuration: Self.configuration)
            try server.start()
        }

        static var configuration: ServerConfiguration {
            var c = ServerConfiguration()
            c.port = 0
            return c
        }

        func restart() async throws {
            server.stop()
            try await store.close()
            store = try await CloudletStore.open(at: dir.sub("store"), configuration: StoreConfiguration(durability: .os))
            server = try Server(store: store, configuration: Self.configuration)
            try server.start()
        }

        func stop() async {
            server.stop()
            try? await store.close()
        }
    }

    let container = "iCloud.com.example.trips"

    @Test func aliceSharesATripBobAcceptsEditsItAndLosesItWhenSheStopsSharing() async throws {
        let live = try await Restartable(TempDir("sharing-flow"))
        let credentials = Credentials(store: live.store)
        let apiToken = try await credentials.createAPIToken(container: container)
        let alice = try await credentials.createUser(name: "alice")
        let bob = try await credentials.createUser(name: "bob")
        let aliceName = alice.user.userRecordName
        func url(_ op: String, _ db: String, _ token: String) -> String {
            "\(live.server.url)/database/1/\(container)/development/\(db)/\(op)?ckAPIToken=\(apiToken)&ckWebAuthToken=\(token)"
        }
        let zone = #"{"zoneName":"Trips","ownerRecordName":"\#(aliceName)"}"#
        do {
            // 1. alice shares a trip of her Trips zone with bob (READ_WRITE).
            let created = try await HTTP.post(
                url("zones/modify", "private", alice.webAuthToken), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"Trips"}}}]}"#)
            #expect(created.status == 200, "\(created)")
            let saved = try await HTTP.post(
                url("records/modify", "private", alice.webAuthToken),
                #"{"zoneID":\#(zone),"operations":["#
                    + #"{"operationType":"create","record":{"recordName":"lisbon","recordType":"Trip","fields":{"title":{"value":"Lisbon"}},"share":{"recordName":"lisbon-share","zoneID":\#(zone)}}},"#
                    + #"{"operationType":"create","record":{"recordName":"lisbon-share","recordType":"cloudkit.share","createShortGUID":true,"#
                    + #""participants":[{"userIdentity":{"lookupInfo":{"userRecordName":"\#(bob.user.userRecordName)"}},"permission":"READ_WRITE","type":"USER"}]}}]}"#)
            #expect(saved.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(saved)")
            #expect(saved.records.first?["share"]?["recordName"]?.stringValue == "lisbon-share", "the root names its share: \(saved)")
            let guid = try #require(saved.records.last?["shortGUID"]?.stringValue, "\(saved)")
            // The share's URL leads to where it is resolved and accepted.
            let link = try await HTTP.get(try #require(saved.records.last?["url"]?.stringValue))
            #expect(link.json["resolveURL"]?.stringValue?.hasSuffix("/database/1/\(container)/development/public/records/resolve") == true, "\(link)")
            #expect(try await HTTP.get("\(live.server.url)/share/nope").serverErrorCode == "NOT_FOUND")
            let feed = try await HTTP.post(url("changes/zone", "private", alice.webAuthToken), #"{"zones":[{"zoneID":\#(zone)}]}"#)
            let aliceToken = try #require(feed.zones.first?["syncToken"]?.stringValue, "\(feed)")
            try await live.restart()

            // 2. bob resolves the share's short GUID (he is invited, pending) and accepts it.
            let resolved = try await HTTP.post(
                url("records/resolve", "public", bob.webAuthToken), #"{"shortGUIDs":[{"value":"\#(guid)","shouldFetchRootRecord":true}]}"#)
            let metadata = try #require(resolved.json["results"]?.arrayValue?.first, "\(resolved)")
            #expect(metadata["participantStatus"]?.stringValue == "PENDING", "\(resolved)")
            #expect(metadata["rootRecord"]?["fields"]?["title"]?["value"]?.stringValue == "Lisbon", "\(resolved)")
            #expect(metadata["ownerIdentity"]?["userRecordName"]?.stringValue == aliceName)
            try await live.restart()
            let accepted = try await HTTP.post(url("records/accept", "public", bob.webAuthToken), #"{"shortGUIDs":[{"value":"\#(guid)"}]}"#)
            #expect(accepted.json["results"]?.arrayValue?.first?["participantStatus"]?.stringValue == "ACCEPTED", "\(accepted)")
            try await live.restart()

            // 3. bob sees the trip in his shared database, with alice as the zone's owner, and edits it.
            let zones = try await HTTP.get(url("zones/list", "shared", bob.webAuthToken))
            #expect(zones.zones.map { $0["zoneID"]?["zoneName"]?.stringValue } == ["Trips"], "\(zones)")
            #expect(zones.zones.first?["zoneID"]?["ownerRecordName"]?.stringValue == aliceName)
            let bobFeed = try await HTTP.post(url("changes/database", "shared", bob.webAuthToken), "{}")
            #expect(bobFeed.zones.compactMap { $0["zoneID"]?["zoneName"]?.stringValue } == ["Trips"], "\(bobFeed)")
            let bobToken = try #require(bobFeed.json["syncToken"]?.stringValue)
            let query = try await HTTP.post(url("records/query", "shared", bob.webAuthToken), #"{"zoneID":\#(zone),"query":{"recordType":"Trip"}}"#)
            let trip = try #require(query.records.first, "\(query)")
            #expect(query.records.count == 1 && trip["recordName"]?.stringValue == "lisbon", "\(query)")
            #expect(trip["share"]?["recordName"]?.stringValue == "lisbon-share", "\(query)")
            let tag = try #require(trip["recordChangeTag"]?.stringValue)
            let edited = try await HTTP.post(
                url("records/modify", "shared", bob.webAuthToken),
                #"{"zoneID":\#(zone),"operations":[{"operationType":"update","record":{"recordName":"lisbon","recordType":"Trip","recordChangeTag":"\#(tag)","fields":{"title":{"value":"Lisbon, 3 nights"}}}},"#
                    // …and adds a day under it (a child: shared too, and alice's — it lives in her zone).
                    + #"{"operationType":"create","record":{"recordName":"lisbon-day1","recordType":"Day","parent":{"recordName":"lisbon"},"fields":{"plan":{"value":"Alfama"}}}}]}"#)
            #expect(edited.records.count == 2 && edited.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(edited)")
            #expect(edited.records.last?["parent"]?["recordName"]?.stringValue == "lisbon", "\(edited)")
            try await live.restart()

            // 4. alice's change feed shows bob's edit.
            let changes = try await HTTP.post(
                url("changes/zone", "private", alice.webAuthToken), #"{"zones":[{"zoneID":\#(zone),"syncToken":"\#(aliceToken)"}]}"#)
            let records = changes.zones.first?["records"]?.arrayValue ?? []
            // The share changed too (bob accepted): it comes first, as its record, with bob ACCEPTED.
            #expect(records.compactMap { $0["recordName"]?.stringValue } == ["lisbon-share", "lisbon", "lisbon-day1"], "\(changes)")
            let bobInShare = records.first?["participants"]?.arrayValue?.first { $0["userIdentity"]?["userRecordName"]?.stringValue == bob.user.userRecordName }
            #expect(bobInShare?["acceptanceStatus"]?.stringValue == "ACCEPTED", "\(changes)")
            let changed = try #require(records.dropFirst().first, "\(changes)")
            #expect(records.last?["created"]?["userRecordName"]?.stringValue == bob.user.userRecordName)
            #expect(changed["fields"]?["title"]?["value"]?.stringValue == "Lisbon, 3 nights")
            #expect(changed["modified"]?["userRecordName"]?.stringValue == bob.user.userRecordName)
            try await live.restart()

            // 5. alice stops sharing: she deletes the share.
            let stopped = try await HTTP.post(
                url("records/modify", "private", alice.webAuthToken),
                #"{"zoneID":\#(zone),"operations":[{"operationType":"forceDelete","record":{"recordName":"lisbon-share"}}]}"#)
            #expect(stopped.records.first?["deleted"] == .bool(true), "\(stopped)")
            try await live.restart()
            // In alice's feed the share's end is the deletion of its record.
            let afterToken = try #require(changes.zones.first?["syncToken"]?.stringValue)
            let ended = try await HTTP.post(
                url("changes/zone", "private", alice.webAuthToken), #"{"zones":[{"zoneID":\#(zone),"syncToken":"\#(afterToken)"}]}"#)
            let endedRecords = ended.zones.first?["records"]?.arrayValue ?? []
            #expect(endedRecords.count == 1 && endedRecords.first?["recordName"]?.stringValue == "lisbon-share", "\(ended)")
            #expect(endedRecords.first?["deleted"] == .bool(true) && endedRecords.first?["recordType"]?.stringValue == "cloudkit.share", "\(ended)")

            // 6. bob no longer sees it; his feed reports the zone gone; the trip stays alice's.
            let after = try await HTTP.get(url("zones/list", "shared", bob.webAuthToken))
            #expect(after.status == 200 && after.zones.isEmpty, "\(after)")
            let lookup = try await HTTP.post(
                url("records/lookup", "shared", bob.webAuthToken), #"{"records":[{"recordName":"lisbon","zoneID":\#(zone)}]}"#)
            #expect(lookup.records.first?["serverErrorCode"]?.stringValue == "ZONE_NOT_FOUND", "\(lookup)")
            let gone = try await HTTP.post(url("changes/database", "shared", bob.webAuthToken), #"{"syncToken":"\#(bobToken)"}"#)
            #expect(gone.zones.first?["deleted"] == .bool(true) && gone.zones.first?["zoneID"]?["zoneName"]?.stringValue == "Trips", "\(gone)")
            let mine = try await HTTP.post(
                url("records/lookup", "private", alice.webAuthToken), #"{"records":[{"recordName":"lisbon","zoneID":\#(zone)}]}"#)
            #expect(mine.records.first?["fields"]?["title"]?["value"]?.stringValue == "Lisbon, 3 nights", "\(mine)")
            let share = try await HTTP.post(
                url("records/lookup", "private", alice.webAuthToken), #"{"records":[{"recordName":"lisbon-share","zoneID":\#(zone)}]}"#)
            #expect(share.records.first?["serverErrorCode"]?.stringValue == "NOT_FOUND", "\(share)")
        } catch {
            await live.stop()
            throw error
        }
        await live.stop()
    }
}
