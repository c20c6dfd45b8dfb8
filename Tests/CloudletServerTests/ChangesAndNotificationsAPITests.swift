import CloudletWire
import Cloudlet
import Foundation
import Testing

@testable import CloudletServer

/// `changes/zone`, `records/changes`, `changes/database`, `zones/changes`, `subscriptions/*`, `tokens/create`, the
/// long-poll courier and the websocket feed, over HTTP.
@Suite(.liveServer) struct ChangesAndNotificationsAPITests {
    func createZone(_ s: LiveServer, _ name: String, as user: String = "alice") async throws {
        let r = try await HTTP.post(
            s.url("zones/modify", as: user), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(name)"}}}]}"#)
        #expect(r.status == 200, "\(r)")
    }

    func modify(_ s: LiveServer, zone: String, _ ops: String, as user: String = "alice") async throws -> Reply {
        try await HTTP.post(s.url("records/modify", as: user), #"{"zoneID":{"zoneName":"\#(zone)"},"operations":[\#(ops)]}"#)
    }

    @Test func zoneChangesPageWithTokensAndReportDeletions() async throws {
        let s = try live
        let zone = unique("Sync")
        try await createZone(s, zone)
        _ = try await modify(s, zone: zone, (0..<5).map { createOp("r\($0)") }.joined(separator: ","))
        _ = try await modify(s, zone: zone, #"{"operationType":"forceDelete","record":{"recordName":"r1"}}"#)
        var names: [String] = []
        var deleted: [String] = []
        var token: String? = nil
        for _ in 0..<10 {
            let body = token.map { #"{"zones":[{"zoneID":{"zoneName":"\#(zone)"},"syncToken":"\#($0)","resultsLimit":2}]}"# }
                ?? #"{"zones":[{"zoneID":{"zoneName":"\#(zone)"},"resultsLimit":2}]}"#
            let r = try await HTTP.post(s.url("changes/zone"), body)
            #expect(r.status == 200, "\(r)")
            let z = r.zones[0]
            for rec in z["records"]?.arrayValue ?? [] {
                if rec["deleted"] == .bool(true) { deleted.append(rec["recordName"]!.stringValue!) } else {
                    names.append(rec["recordName"]!.stringValue!)
                }
            }
            token = z["syncToken"]?.stringValue
            if z["moreComing"] != .bool(true) { break }
        }
        #expect(names == ["r0", "r2", "r3", "r4"])
        #expect(deleted == ["r1"])
        // The older records/changes says the same from the final token: nothing new.
        let older = try await HTTP.post(s.url("records/changes"), #"{"zoneID":{"zoneName":"\#(zone)"},"syncToken":"\#(token!)"}"#)
        #expect(older.status == 200 && older.records.isEmpty, "\(older)")
        // A token of another zone, or garbage, is BAD_REQUEST.
        let other = unique("Other")
        try await createZone(s, other)
        let wrong = try await HTTP.post(s.url("records/changes"), #"{"zoneID":{"zoneName":"\#(other)"},"syncToken":"\#(token!)"}"#)
        #expect(wrong.status == 400 && wrong.serverErrorCode == "BAD_REQUEST", "\(wrong)")
        let garbage = try await HTTP.post(s.url("changes/zone"), #"{"zones":[{"zoneID":{"zoneName":"\#(zone)"},"syncToken":"AAAA"}]}"#)
        #expect(garbage.zones.first?["serverErrorCode"]?.stringValue == "BAD_REQUEST", "\(garbage)")
        // Bob cannot read alice's zone feed, whatever owner he names.
        let bob = try await HTTP.post(
            s.url("changes/zone", as: "bob"), #"{"zones":[{"zoneID":{"zoneName":"\#(zone)","ownerRecordName":"\#(s.alice.user.userRecordName)"}}]}"#)
        #expect(bob.zones.first?["serverErrorCode"]?.stringValue == "ZONE_NOT_FOUND", "\(bob)")
    }

    @Test func databaseChangesListChangedAndDeletedZones() async throws {
        let s = try live
        let start = try await HTTP.post(s.url("changes/database", as: "bob"), "{}")
        let token = try #require(start.json["syncToken"]?.stringValue)
        let z1 = unique("A"), z2 = unique("B")
        try await createZone(s, z1, as: "bob")
        try await createZone(s, z2, as: "bob")
        _ = try await HTTP.post(
            s.url("zones/modify", as: "bob"), #"{"operations":[{"operationType":"delete","zone":{"zoneID":{"zoneName":"\#(z2)"}}}]}"#)
        let r = try await HTTP.post(s.url("zones/changes", as: "bob"), #"{"syncToken":"\#(token)"}"#)
        #expect(r.status == 200, "\(r)")
        let changed = r.zones.filter { $0["deleted"] != .bool(true) }.compactMap { $0["zoneID"]?["zoneName"]?.stringValue }
        let deleted = r.zones.filter { $0["deleted"] == .bool(true) }.compactMap { $0["zoneID"]?["zoneName"]?.stringValue }
        #expect(changed == [z1] && deleted == [z2], "\(r)")
        let pub = try await HTTP.post(s.url("changes/database", db: "public"), "{}")
        #expect(pub.serverErrorCode == "BAD_REQUEST", "\(pub)")
    }

    @Test func subscriptionsAreCreatedListedLookedUpAndDeleted() async throws {
        let s = try live
        let id = unique("sub")
        let sub = #"{"subscriptionID":"\#(id)","subscriptionType":"query","query":{"recordType":"Item","filterBy":[{"comparator":"LESS_THAN","fieldName":"price","fieldValue":{"value":10}}]},"firesOn":["create","update"]}"#
        let created = try await HTTP.post(s.url("subscriptions/modify", as: "bob"), #"{"operations":[{"operationType":"create","subscription":\#(sub)}]}"#)
        #expect(created.json["subscriptions"]?.arrayValue?.first?["subscriptionID"]?.stringValue == id, "\(created)")
        let again = try await HTTP.post(s.url("subscriptions/modify", as: "bob"), #"{"operations":[{"operationType":"create","subscription":\#(sub)}]}"#)
        #expect(again.json["subscriptions"]?.arrayValue?.first?["serverErrorCode"]?.stringValue == "EXISTS", "\(again)")
        let list = try await HTTP.get(s.url("subscriptions/list", as: "bob"))
        #expect(list.json["subscriptions"]?.arrayValue?.contains { $0["subscriptionID"]?.stringValue == id } == true, "\(list)")
        let aliceList = try await HTTP.get(s.url("subscriptions/list", as: "alice"))
        #expect(aliceList.json["subscriptions"]?.arrayValue?.contains { $0["subscriptionID"]?.stringValue == id } != true)
        let lookup = try await HTTP.post(
            s.url("subscriptions/lookup", as: "bob"), #"{"subscriptions":[{"subscriptionID":"\#(id)"},{"subscriptionID":"nope"}]}"#)
        let looked = lookup.json["subscriptions"]?.arrayValue ?? []
        #expect(looked.map { $0["serverErrorCode"]?.stringValue } == [nil, "NOT_FOUND"], "\(lookup)")
        #expect(looked.first?["query"]?["filterBy"]?.arrayValue?.first?["comparator"]?.stringValue == "LESS_THAN")
        let bad = try await HTTP.post(
            s.url("subscriptions/modify", as: "bob"),
            #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"x","subscriptionType":"query","query":{"recordType":"Item"},"firesOn":["sometimes"]}}]}"#)
        #expect(bad.serverErrorCode == "BAD_REQUEST" && bad.reason.contains("firesOn"), "\(bad)")
        let del = try await HTTP.post(
            s.url("subscriptions/modify", as: "bob"), #"{"operations":[{"operationType":"delete","subscription":{"subscriptionID":"\#(id)"}}]}"#)
        #expect(del.json["subscriptions"]?.arrayValue?.first?["deleted"] == .bool(true), "\(del)")
    }

    /// The per-user cap (StoreConfiguration.subscriptionsPerUser, 1,000 by default): a request that would pass it is
    /// QUOTA_EXCEEDED (413) and changes nothing, not even its operations that would fit.
    @Test func aSubscriptionsModifyOverThePerUserCapIsQuotaExceededAndSavesNothing() async throws {
        let s = try live
        let cap = s.store.configuration.subscriptionsPerUser
        func create(_ id: String) -> String {
            #"{"operationType":"create","subscription":{"subscriptionID":"\#(id)","subscriptionType":"query","query":{"recordType":"Capped"},"firesOn":["create"]}}"#
        }
        var made = 0
        while made < cap {
            let n = min(200, cap - made)
            let ops = (made..<(made + n)).map { create("cap-\($0)") }.joined(separator: ",")
            let r = try await HTTP.post(s.url("subscriptions/modify", db: "public", as: "bob"), #"{"operations":[\#(ops)]}"#)
            #expect(r.status == 200, "\(r)")
            made += n
        }
        let over = try await HTTP.post(
            s.url("subscriptions/modify", db: "public", as: "bob"),
            #"{"operations":[{"operationType":"delete","subscription":{"subscriptionID":"cap-0"}},\#(create("cap-x")),\#(create("cap-y"))]}"#)
        #expect(over.status == 413 && over.serverErrorCode == "QUOTA_EXCEEDED", "\(over)")
        #expect(over.reason.contains("limit is \(cap)"), "\(over)")
        let list = try await HTTP.get(s.url("subscriptions/list", db: "public", as: "bob"))
        let ids = Set(list.json["subscriptions"]?.arrayValue?.compactMap { $0["subscriptionID"]?.stringValue } ?? [])
        #expect(ids.count == cap && ids.contains("cap-0") && !ids.contains("cap-x"))
        // Alice has her own allowance.
        let alice = try await HTTP.post(s.url("subscriptions/modify", db: "public", as: "alice"), #"{"operations":[\#(create("cap-a"))]}"#)
        #expect(alice.status == 200, "\(alice)")
    }

    /// A query subscription fires for exactly the matching commits, and both a long-poll and a websocket client
    /// get the notifications, including what they missed while disconnected.
    @Test func longPollAndWebSocketClientsReceiveExactlyTheMatchingNotifications() async throws {
        let s = try live
        let zone = unique("Notify")
        try await createZone(s, zone)
        let subID = unique("cheap")
        let sub = #"{"subscriptionID":"\#(subID)","subscriptionType":"query","zoneID":{"zoneName":"\#(zone)"},"query":{"recordType":"Item","filterBy":[{"comparator":"LESS_THAN","fieldName":"price","fieldValue":{"value":10}}]},"firesOn":["create","update"],"notificationInfo":{"desiredKeys":["price"]}}"#
        _ = try await HTTP.post(s.url("subscriptions/modify"), #"{"operations":[{"operationType":"create","subscription":\#(sub)}]}"#)
        let token = try await HTTP.post(s.url("tokens/create"), #"{"apnsEnvironment":"development"}"#)
        let courier = try #require(token.json["webcourierURL"]?.stringValue, "\(token)")
        let apnsToken = try #require(token.json["apnsToken"]?.stringValue)
        let ws = try WebSocketTestClient(host: "127.0.0.1", port: s.server.port, path: "/cloudlet/notifications/ws?token=\(apnsToken)")

        func item(_ name: String, _ price: Int) -> String {
            #"{"operationType":"forceUpdate","record":{"recordName":"\#(name)","recordType":"Item","fields":{"price":{"value":\#(price)}}}}"#
        }
        _ = try await modify(s, zone: zone, item("cheap", 5))       // fires (create)
        _ = try await modify(s, zone: zone, item("dear", 50))       // no: does not match
        _ = try await modify(s, zone: zone, item("dear", 60))       // no: an update that does not match
        _ = try await modify(s, zone: zone, item("dear", 7))        // fires (update now matching)

        // Long-poll: both, in order, with desiredKeys.
        var got: [JSONValue] = []
        var after = ""
        for _ in 0..<5 where got.count < 2 {
            let r = try await HTTP.get(courier + "&timeout=5" + (after.isEmpty ? "" : "&after=\(after)"))
            #expect(r.status == 200, "\(r)")
            got += r.json["notifications"]?.arrayValue ?? []
            after = r.json["next"]?.stringValue ?? after
        }
        #expect(got.map { $0["recordName"]?.stringValue } == ["cheap", "dear"], "\(got)")
        #expect(got.map { $0["queryNotificationReason"]?.stringValue } == ["recordCreated", "recordUpdated"])
        #expect(got.last?["fields"]?["price"]?["value"] == .number(JSONNumber(text: "7", isInteger: true)))

        // Websocket: the same two.
        let pushed = try await ws.wait(for: 2)
        #expect(pushed.count == 2, "\(pushed)")
        #expect(pushed.map { (try? JSONParser.parse(Array($0.utf8)))?["recordName"]?.stringValue } == ["cheap", "dear"])
        let lastSeen = try #require((try JSONParser.parse(Array(pushed[1].utf8)))["notificationID"]?.stringValue)
        ws.close()

        // While both are away, one more matching commit; each gets it on reconnecting from its position.
        _ = try await modify(s, zone: zone, item("third", 1))
        let missed = try await HTTP.get(courier + "&timeout=5&after=\(after)")
        #expect(missed.json["notifications"]?.arrayValue?.map { $0["recordName"]?.stringValue } == ["third"], "\(missed)")
        #expect(missed.json["gap"] == .bool(false))
        let ws2 = try WebSocketTestClient(
            host: "127.0.0.1", port: s.server.port, path: "/cloudlet/notifications/ws?token=\(apnsToken)&after=\(lastSeen)")
        let replay = try await ws2.wait(for: 1)
        #expect(replay.map { (try? JSONParser.parse(Array($0.utf8)))?["recordName"]?.stringValue } == ["third"], "\(replay)")
        ws2.close()

        let badToken = try await HTTP.get("\(s.server.url)/cloudlet/notifications/poll?token=nope")
        #expect(badToken.status == 401 && badToken.serverErrorCode == "AUTHENTICATION_FAILED")
    }
}

/// Its own server: a purge forgets tombstones store-wide, which would expire the other suites' tokens.
@Suite(.liveServer) struct ChangeTokenExpiryAPITests {
    func createZone(_ s: LiveServer, _ name: String) async throws {
        _ = try await HTTP.post(
            s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(name)"}}}]}"#)
    }

    func modify(_ s: LiveServer, zone: String, _ ops: String) async throws -> Reply {
        try await HTTP.post(s.url("records/modify"), #"{"zoneID":{"zoneName":"\#(zone)"},"operations":[\#(ops)]}"#)
    }

    @Test func anExpiredTokenGetsChangeTokenExpired() async throws {
        let s = try live
        let zone = unique("Expire")
        try await createZone(s, zone)
        _ = try await modify(s, zone: zone, createOp("a"))
        let first = try await HTTP.post(s.url("records/changes"), #"{"zoneID":{"zoneName":"\#(zone)"}}"#)
        let token = try #require(first.json["syncToken"]?.stringValue)
        _ = try await modify(s, zone: zone, #"{"operationType":"forceDelete","record":{"recordName":"a"}}"#)
        _ = try await modify(s, zone: zone, createOp("b"))
        _ = try await s.store.purgeTombstones(olderThan: -1)
        let r = try await HTTP.post(s.url("records/changes"), #"{"zoneID":{"zoneName":"\#(zone)"},"syncToken":"\#(token)"}"#)
        #expect(r.serverErrorCode == "CHANGE_TOKEN_EXPIRED", "\(r)")
    }
}
