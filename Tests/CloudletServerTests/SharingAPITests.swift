import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// Sharing over the Web Services API: shares saved with `records/modify`, `records/resolve` and `records/accept`, and
/// what each kind of caller may do with shared records through their shared database.
@Suite(.liveServer, .serialized) struct SharingAPITests {
    enum Caller: String, CaseIterable, CustomStringConvertible {
        /// alice, who owns the zone and the share (through her private database).
        case owner
        /// bob: invited READ_WRITE, accepted.
        case readWrite
        /// carol: invited READ_ONLY, accepted.
        case readOnly
        /// dave: joined a zone-wide share with public permission READ_ONLY by its URL.
        case publicUser
        /// erin: never invited.
        case stranger
        /// frank: invited, accepted, then removed by the owner.
        case removed
        var description: String { rawValue }
    }

    enum Operation: String, CaseIterable, CustomStringConvertible {
        case lookup, query, modify, delete, changes, subscriptions, resolve, accept
        var description: String { rawValue }
    }

    /// `ok` (and the right records: only the shared ones for a participant); `rX`: 200 with error X on the item;
    /// `X`: the request fails with X. Codes: `DENIED` ACCESS_DENIED, `ZONE` ZONE_NOT_FOUND.
    static let expected: [Operation: [String]] = [
        //               owner  readWrite  readOnly   publicUser stranger  removed
        .lookup: [        "ok", "ok",      "ok",      "ok",      "rZONE",  "rZONE"],
        .query: [         "ok", "ok",      "ok",      "ok",      "ZONE",   "ZONE"],
        .modify: [        "ok", "ok",      "rDENIED", "rDENIED", "rZONE",  "rZONE"],
        .delete: [        "ok", "rDENIED", "rDENIED", "rDENIED", "rZONE",  "rZONE"],
        .changes: [       "ok", "ok",      "ok",      "ok",      "rZONE",  "rZONE"],
        .subscriptions: [ "ok", "ok",      "ok",      "ok",      "rZONE",  "rZONE"],
        .resolve: [       "ok", "ok",      "ok",      "ok",      "rDENIED", "rDENIED"],
        .accept: [        "ok", "ok",      "ok",      "ok",      "rDENIED", "rDENIED"],
    ]

    /// What the matrix runs against: a hierarchy share of `t1` in one of alice's zones (`t2` stays private), and a
    /// zone-wide public share of another zone holding `o1`.
    struct Setup {
        var tokens: [Caller: String]
        var trips: String
        var open: String
        var hierarchyGUID: String
        var zoneWideGUID: String
    }

    func setUp(_ s: LiveServer) async throws -> Setup {
        let credentials = Credentials(store: s.store)
        var tokens: [Caller: String] = [.owner: "alice", .readWrite: "bob"]
        var names: [Caller: String] = [:]
        for (caller, name) in [(Caller.readOnly, "carol"), (.publicUser, "dave"), (.stranger, "erin"), (.removed, "frank")] {
            let u = try await credentials.createUser(name: name)
            tokens[caller] = u.webAuthToken
            names[caller] = u.user.userRecordName
        }
        let trips = unique("Trips"), open = unique("Open")
        let zones = try await HTTP.post(
            s.url("zones/modify"),
            #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(trips)"}}},{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(open)"}}}]}"#)
        #expect(zones.status == 200, "\(zones)")
        let participants = [(s.bob.user.userRecordName, "READ_WRITE"), (names[.readOnly]!, "READ_ONLY"), (names[.removed]!, "READ_ONLY")]
            .map { #"{"userIdentity":{"userRecordName":"\#($0.0)"},"permission":"\#($0.1)"}"# }.joined(separator: ",")
        // The root carries `share`; the share is saved in the same request (CloudKit's way).
        let shared = try await HTTP.post(
            s.url("records/modify"),
            #"{"zoneID":{"zoneName":"\#(trips)"},"operations":["#
                + #"{"operationType":"create","record":{"recordName":"t1","recordType":"Trip","fields":{"title":{"value":"Lisbon"}},"share":{"recordName":"s1"}}},"#
                + #"{"operationType":"create","record":{"recordName":"t2","recordType":"Trip","fields":{"title":{"value":"Porto"}}}},"#
                + #"{"operationType":"create","record":{"recordName":"s1","recordType":"cloudkit.share","createShortGUID":true,"publicPermission":"NONE","participants":[\#(participants)]}}]}"#)
        #expect(shared.status == 200 && shared.records.count == 3, "\(shared)")
        let share = try #require(shared.records.last)
        #expect(share["recordType"]?.stringValue == "cloudkit.share", "\(shared)")
        #expect(share["participants"]?.arrayValue?.count == 4, "the owner and three participants: \(share)")
        #expect(share["forRecord"]?["recordName"]?.stringValue == "t1")
        let guid = try #require(share["shortGUID"]?.stringValue)
        #expect(share["url"]?.stringValue?.hasSuffix("/share/\(guid)") == true)
        let zoneWide = try await HTTP.post(
            s.url("records/modify"),
            #"{"zoneID":{"zoneName":"\#(open)"},"operations":[\#(createOp("o1", type: "Trip")),"#
                + #"{"operationType":"create","record":{"recordName":"cloudkit.zoneshare","recordType":"cloudkit.share","publicPermission":"READ_ONLY"}}]}"#)
        let openGUID = try #require(zoneWide.records.last?["shortGUID"]?.stringValue, "\(zoneWide)")
        for caller in [Caller.readWrite, .readOnly, .removed] {
            let accepted = try await HTTP.post(
                s.url("records/accept", db: "public", as: tokens[caller]), #"{"shortGUIDs":[{"value":"\#(guid)"}]}"#)
            #expect(accepted.json["results"]?.arrayValue?.first?["participantStatus"]?.stringValue == "ACCEPTED", "\(caller): \(accepted)")
        }
        let joined = try await HTTP.post(
            s.url("records/accept", db: "public", as: tokens[.publicUser]), #"{"shortGUIDs":[{"value":"\#(openGUID)"}]}"#)
        #expect(joined.json["results"]?.arrayValue?.first?["participantType"]?.stringValue == "PUBLIC_USER", "\(joined)")
        // alice removes frank: the share as she read it, without him.
        let lookup = try await HTTP.post(s.url("records/lookup"), #"{"zoneID":{"zoneName":"\#(trips)"},"records":[{"recordName":"s1"}]}"#)
        let tag = try #require(lookup.records.first?["recordChangeTag"]?.stringValue, "\(lookup)")
        let kept = [(s.bob.user.userRecordName, "READ_WRITE"), (names[.readOnly]!, "READ_ONLY")]
            .map { #"{"userIdentity":{"userRecordName":"\#($0.0)"},"permission":"\#($0.1)"}"# }.joined(separator: ",")
        let updated = try await HTTP.post(
            s.url("records/modify"),
            #"{"zoneID":{"zoneName":"\#(trips)"},"operations":[{"operationType":"update","record":{"recordName":"s1","recordType":"cloudkit.share","recordChangeTag":"\#(tag)","participants":[\#(kept)]}}]}"#)
        // frank stays listed, REMOVED (CloudKit keeps removed participants); the rest keep their acceptance.
        let statuses = (updated.records.first?["participants"]?.arrayValue ?? []).compactMap { p in
            p["userIdentity"]?["userRecordName"]?.stringValue.map { "\($0):\(p["acceptanceStatus"]?.stringValue ?? "?")" }
        }
        #expect(statuses.count == 4 && statuses.contains("\(names[.removed]!):REMOVED"), "\(updated)")
        return Setup(tokens: tokens, trips: trips, open: open, hierarchyGUID: guid, zoneWideGUID: openGUID)
    }

    @Test func everyCallerGetsExactlyWhatTheTableSays() async throws {
        let s = try live
        let setup = try await setUp(s)
        var mismatches: [String] = []
        // The owner's deletion of the root ends the share: it runs last.
        for op in Operation.allCases {
            for (caller, want) in zip(Caller.allCases, Self.expected[op]!) where !(op == .delete && caller == .owner) {
                let got = try await outcome(s, setup, caller, op)
                if got != want { mismatches.append("\(op) as \(caller): expected \(want), got \(got)") }
            }
        }
        // carol leaves: she deletes the share through her shared database; alice still has it, with carol REMOVED.
        let zone = #"{"zoneName":"\#(setup.trips)","ownerRecordName":"\#(s.alice.user.userRecordName)"}"#
        let left = try await HTTP.post(
            s.url("records/modify", db: "shared", as: setup.tokens[.readOnly]),
            #"{"zoneID":\#(zone),"operations":[{"operationType":"forceDelete","record":{"recordName":"s1"}}]}"#)
        #expect(left.records.first?["deleted"] == .bool(true), "\(left)")
        let carolZones = try await HTTP.get(s.url("zones/list", db: "shared", as: setup.tokens[.readOnly]))
        #expect(carolZones.status == 200 && carolZones.zones.isEmpty, "\(carolZones)")
        let kept = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"s1","zoneID":\#(zone)}]}"#)
        let statuses = (kept.records.first?["participants"]?.arrayValue ?? []).compactMap { $0["acceptanceStatus"]?.stringValue }
        #expect(statuses.sorted() == ["ACCEPTED", "ACCEPTED", "REMOVED", "REMOVED"], "owner, bob, carol, frank: \(kept)")
        let ownerDelete = try await outcome(s, setup, .owner, .delete)
        if ownerDelete != "ok" { mismatches.append("delete as owner: expected ok, got \(ownerDelete)") }
        #expect(mismatches.isEmpty, "\(mismatches.count) cells differ:\n\(mismatches.joined(separator: "\n"))")
        // Deleting the root ended the share: bob's shared database no longer lists the zone.
        let zones = try await HTTP.get(s.url("zones/list", db: "shared", as: "bob"))
        #expect(!zones.zones.contains { $0["zoneID"]?["zoneName"]?.stringValue == setup.trips }, "\(zones)")
    }

    /// Runs one cell and names its outcome. Cells that are not `ok` are checked to have changed nothing.
    func outcome(_ s: LiveServer, _ setup: Setup, _ caller: Caller, _ op: Operation) async throws -> String {
        let owner = s.alice.user.userRecordName
        let (zoneName, target, guid) = caller == .publicUser
            ? (setup.open, "o1", setup.zoneWideGUID) : (setup.trips, "t1", setup.hierarchyGUID)
        let zone = #"{"zoneName":"\#(zoneName)","ownerRecordName":"\#(owner)"}"#
        let db = caller == .owner ? "private" : "shared"
        let token = setup.tokens[caller]!
        func url(_ operation: String, _ database: String = db) -> String { s.url(operation, db: database, as: token) }
        /// The code of a failed request, or of the first item of `key`.
        func code(_ r: Reply, _ key: String) -> String? {
            if r.status != 200 { return short(r.serverErrorCode ?? "HTTP \(r.status)") }
            return r.json[key]?.arrayValue?.first?["serverErrorCode"]?.stringValue.map { "r" + short($0) }
        }
        func short(_ c: String) -> String { c == "ACCESS_DENIED" ? "DENIED" : c == "ZONE_NOT_FOUND" ? "ZONE" : c }
        func titleOfTarget() async throws -> String? {
            let r = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"\#(target)","zoneID":\#(zone)}]}"#)
            return r.records.first?["fields"]?["title"]?["value"]?.stringValue
        }
        /// The records a participant sees are the shared ones only; the owner sees her whole zone.
        let visible = caller == .owner ? ["t1", "t2"] : [target]
        switch op {
        case .lookup:
            let r = try await HTTP.post(url("records/lookup"), #"{"records":[{"recordName":"\#(target)","zoneID":\#(zone)}]}"#)
            if let c = code(r, "records") { return c }
            // The hierarchy share's root names its share.
            if caller != .publicUser && r.records.first?["share"]?["recordName"]?.stringValue != "s1" { return "no share: \(r)" }
            return r.records.first?["recordName"]?.stringValue == target ? "ok" : "wrong: \(r)"
        case .query:
            let r = try await HTTP.post(url("records/query"), #"{"zoneID":\#(zone),"query":{"recordType":"Trip"}}"#)
            if let c = code(r, "records") { return c }
            let names = r.records.compactMap { $0["recordName"]?.stringValue }.sorted()
            return names == visible ? "ok" : "wrong records \(names)"
        case .modify:
            let before = try await titleOfTarget()
            let title = unique("by-\(caller)")
            let r = try await HTTP.post(
                url("records/modify"),
                #"{"zoneID":\#(zone),"operations":[{"operationType":"forceUpdate","record":{"recordName":"\#(target)","recordType":"Trip","fields":{"title":{"value":"\#(title)"}}}}]}"#)
            let after = try await titleOfTarget()
            if let c = code(r, "records") { return after == before ? c : "\(c), but the record changed" }
            return after == title ? "ok" : "not applied: \(r)"
        case .delete:
            let r = try await HTTP.post(
                url("records/modify"),
                #"{"zoneID":\#(zone),"operations":[{"operationType":"forceDelete","record":{"recordName":"\#(target)"}}]}"#)
            let after = try await titleOfTarget()
            if let c = code(r, "records") { return after != nil ? c : "\(c), but the record is gone" }
            return after == nil ? "ok" : "not applied: \(r)"
        case .changes:
            let r = try await HTTP.post(url("changes/zone"), #"{"zones":[{"zoneID":\#(zone)}]}"#)
            if let c = code(r, "zones") { return c }
            let records = r.zones.first?["records"]?.arrayValue ?? []
            // The share itself is a record of the feed (`cloudkit.share`, written as the share's dictionary).
            let shares = records.filter { $0["recordType"]?.stringValue == "cloudkit.share" }
            let names = records.filter { $0["recordType"]?.stringValue != "cloudkit.share" }.compactMap { $0["recordName"]?.stringValue }.sorted()
            guard r.zones.first?["zoneID"]?["ownerRecordName"]?.stringValue == owner else { return "wrong zone owner: \(r)" }
            guard shares.count == 1, shares[0]["participants"]?.arrayValue?.isEmpty == false else { return "no share record: \(r)" }
            return names == visible ? "ok" : "wrong records \(names)"
        case .subscriptions:
            let r = try await HTTP.post(
                url("subscriptions/modify"),
                #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"\#(unique("sub"))","subscriptionType":"zone","zoneID":\#(zone)}}]}"#)
            return code(r, "subscriptions") ?? "ok"
        case .resolve, .accept:
            let r = try await HTTP.post(url("records/\(op)", "public"), #"{"shortGUIDs":[{"value":"\#(guid)","shouldFetchRootRecord":true}]}"#)
            if let c = code(r, "results") { return c }
            let result = r.json["results"]?.arrayValue?.first
            guard result?["share"]?["shortGUID"]?.stringValue == guid, result?["ownerIdentity"]?["userRecordName"]?.stringValue == owner else {
                return "wrong metadata: \(r)"
            }
            if op == .accept && caller != .owner && result?["participantStatus"]?.stringValue != "ACCEPTED" { return "not accepted: \(r)" }
            return "ok"
        }
    }

    /// alice's zone `name` holding record `r` (a Trip titled "t"), shared whole with bob with `permission`, accepted.
    func zoneSharedWithBob(_ s: LiveServer, _ name: String, permission: String) async throws {
        let zone = try await HTTP.post(
            s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(name)"}}}]}"#)
        #expect(zone.status == 200, "\(zone)")
        let shared = try await HTTP.post(
            s.url("records/modify"),
            #"{"zoneID":{"zoneName":"\#(name)"},"operations":[\#(createOp("r", type: "Trip")),"#
                + #"{"operationType":"create","record":{"recordName":"cloudkit.zoneshare","recordType":"cloudkit.share","#
                + #""participants":[{"userIdentity":{"userRecordName":"\#(s.bob.user.userRecordName)"},"permission":"\#(permission)"}]}}]}"#)
        let guid = try #require(shared.records.last?["shortGUID"]?.stringValue, "\(shared)")
        let accepted = try await HTTP.post(s.url("records/accept", db: "public", as: "bob"), #"{"shortGUIDs":[{"value":"\#(guid)"}]}"#)
        #expect(accepted.json["results"]?.arrayValue?.first?["participantStatus"]?.stringValue == "ACCEPTED", "\(accepted)")
    }

    @Test func theSharedDatabasesChangesDatabaseIsPagedByResultsLimit() async throws {
        let s = try live
        let names = (0..<3).map { _ in unique("Paged") }
        for name in names { try await zoneSharedWithBob(s, name, permission: "READ_ONLY") }
        // One zone a page (bob may have more shared zones, from the other tests): every page within the limit, each of
        // these zones reported, the last page without moreComing.
        var seen: [String] = []
        var token: String?
        var pages = 0
        while pages < 50 {
            let body = token.map { #"{"resultsLimit":1,"syncToken":"\#($0)"}"# } ?? #"{"resultsLimit":1}"#
            let r = try await HTTP.post(s.url("changes/database", db: "shared", as: "bob"), body)
            #expect(r.status == 200, "\(r)")
            let zones = r.zones.compactMap { $0["zoneID"]?["zoneName"]?.stringValue }
            #expect(zones.count <= 1, "\(r)")
            seen += zones
            token = r.json["syncToken"]?.stringValue
            pages += 1
            if r.json["moreComing"] != .bool(true) { break }
        }
        #expect(Set(names).isSubset(of: Set(seen)), "\(seen)")
        #expect(pages >= names.count && pages < 50, "\(pages) pages")
    }

    @Test func aShareAndItsRootInOneAtomicRequestAreSavedTogetherOrNotAtAll() async throws {
        let s = try live
        let name = "Atomic-\(UUID().uuidString.prefix(8))"
        let zone = #"{"zoneName":"\#(name)"}"#
        let made = try await HTTP.post(s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":\#(zone)}}]}"#)
        #expect(made.status == 200, "\(made)")
        func rootAndShare(_ root: String, _ share: String) -> String {
            #"{"zoneID":\#(zone),"operations":["#
                + #"{"operationType":"create","record":{"recordName":"\#(root)","recordType":"Trip","share":{"recordName":"\#(share)"}}},"#
                + #"{"operationType":"create","record":{"recordName":"\#(share)","recordType":"cloudkit.share","publicPermission":"NONE"}}]}"#
        }
        let saved = try await HTTP.post(s.url("records/modify"), rootAndShare("a", "a-share"))
        #expect(saved.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(saved)")
        #expect(saved.records.first?["share"]?["recordName"]?.stringValue == "a-share", "\(saved)")
        // The same share name again: the share fails, and with it the root saved alongside (one commit: neither).
        let failed = try await HTTP.post(s.url("records/modify"), rootAndShare("b", "a-share"))
        #expect(failed.records.first?["serverErrorCode"]?.stringValue == "ATOMIC_ERROR", "\(failed)")
        #expect(failed.records.last?["serverErrorCode"]?.stringValue == "EXISTS", "\(failed)")
        let lookup = try await HTTP.post(s.url("records/lookup"), #"{"zoneID":\#(zone),"records":[{"recordName":"b"},{"recordName":"a-share"}]}"#)
        #expect(lookup.records.first?["serverErrorCode"]?.stringValue == "NOT_FOUND", "\(lookup)")
        // The share is looked up as a record of its zone: its dictionary, with its root.
        #expect(lookup.records.last?["recordType"]?.stringValue == "cloudkit.share", "\(lookup)")
        #expect(lookup.records.last?["forRecord"]?["recordName"]?.stringValue == "a", "\(lookup)")
        // An update of the share goes into the zone's commit too: a stale tag fails the record saved with it.
        let stale = try await HTTP.post(
            s.url("records/modify"),
            #"{"zoneID":\#(zone),"operations":[{"operationType":"create","record":{"recordName":"c","recordType":"Trip"}},"#
                + #"{"operationType":"update","record":{"recordName":"a-share","recordType":"cloudkit.share","recordChangeTag":"stale","publicPermission":"READ_ONLY"}}]}"#)
        #expect(stale.records.first?["serverErrorCode"]?.stringValue == "ATOMIC_ERROR", "\(stale)")
        #expect(stale.records.last?["serverErrorCode"]?.stringValue == "CONFLICT", "\(stale)")
        // Deleting it with its change tag ends it: a deletion of its record.
        let tag = try #require(lookup.records.last?["recordChangeTag"]?.stringValue)
        let ended = try await HTTP.post(
            s.url("records/modify"), #"{"zoneID":\#(zone),"operations":[{"operationType":"delete","record":{"recordName":"a-share","recordChangeTag":"\#(tag)"}}]}"#)
        #expect(ended.records.first?["deleted"] == .bool(true), "\(ended)")
        let gone = try await HTTP.post(s.url("records/lookup"), #"{"zoneID":\#(zone),"records":[{"recordName":"a-share"}]}"#)
        #expect(gone.records.first?["serverErrorCode"]?.stringValue == "NOT_FOUND", "\(gone)")
    }

    @Test func aParticipantLeavingInRecordsModifyIsPartOfTheZonesOneCommit() async throws {
        let s = try live
        let name = unique("Leave")
        try await zoneSharedWithBob(s, name, permission: "READ_WRITE")
        let zone = #"{"zoneName":"\#(name)","ownerRecordName":"\#(s.alice.user.userRecordName)"}"#
        func bobsRequest(_ shareDeletion: String, title: String) async throws -> Reply {
            try await HTTP.post(
                s.url("records/modify", db: "shared", as: "bob"),
                #"{"zoneID":\#(zone),"atomic":true,"operations":["#
                    + #"{"operationType":"forceUpdate","record":{"recordName":"r","recordType":"Trip","fields":{"title":{"value":"\#(title)"}}}},"#
                    + #"{"operationType":\#(shareDeletion),"record":{"recordName":"cloudkit.zoneshare"\#(shareDeletion == #""delete""# ? #","recordChangeTag":"stale""# : "")}}]}"#)
        }
        func title() async throws -> String? {
            let r = try await HTTP.post(s.url("records/lookup"), #"{"zoneID":{"zoneName":"\#(name)"},"records":[{"recordName":"r"}]}"#)
            return r.records.first?["fields"]?["title"]?["value"]?.stringValue
        }
        func bobSeesTheZone() async throws -> Bool {
            let zones = try await HTTP.get(s.url("zones/list", db: "shared", as: "bob"))
            return zones.zones.contains { $0["zoneID"]?["zoneName"]?.stringValue == name }
        }
        // Leaving with a stale change tag fails, and so does the record saved with it: nothing of the request is applied.
        let stale = try await bobsRequest(#""delete""#, title: "stale")
        #expect(stale.records.first?["serverErrorCode"]?.stringValue == "ATOMIC_ERROR", "\(stale)")
        #expect(stale.records.last?["serverErrorCode"]?.stringValue == "CONFLICT", "\(stale)")
        #expect(try await title() == "t", "the record saved with a failed leave is not applied")
        #expect(try await bobSeesTheZone())
        // Leaving with the record: both, in one commit (the record's change tag and the share's name one LSN).
        let left = try await bobsRequest(#""forceDelete""#, title: "last words")
        #expect(left.records.first?["recordChangeTag"] != nil && left.records.last?["deleted"] == .bool(true), "\(left)")
        #expect(try await title() == "last words")
        #expect(try await !bobSeesTheZone())
        let share = try await HTTP.post(s.url("records/lookup"), #"{"zoneID":{"zoneName":"\#(name)"},"records":[{"recordName":"cloudkit.zoneshare"}]}"#)
        let bob = share.records.first?["participants"]?.arrayValue?.first { $0["userIdentity"]?["userRecordName"]?.stringValue == s.bob.user.userRecordName }
        #expect(bob?["acceptanceStatus"]?.stringValue == "REMOVED", "\(share)")
        // A change tag is `<commit LSN>[-<index in the commit>]` (base 36).
        let lsn = { (tag: String?) in tag?.split(separator: "-").first.map(String.init) }
        let recordLSN = lsn(left.records.first?["recordChangeTag"]?.stringValue)
        #expect(recordLSN != nil && recordLSN == lsn(share.records.first?["recordChangeTag"]?.stringValue), "\(left) \(share)")
    }

    @Test func resolveAndAcceptAreForSignedInUsersOnTheirOwnPublicRoute() async throws {
        let s = try live
        let none = try await HTTP.post(s.url("records/accept", db: "public", as: nil), #"{"shortGUIDs":[{"value":"x"}]}"#)
        #expect(none.serverErrorCode == "AUTHENTICATION_REQUIRED", "\(none)")
        let privateRoute = try await HTTP.post(s.url("records/resolve", db: "private"), #"{"shortGUIDs":[{"value":"x"}]}"#)
        #expect(privateRoute.serverErrorCode == "BAD_REQUEST", "\(privateRoute)")
        let unknown = try await HTTP.post(s.url("records/resolve", db: "public"), #"{"shortGUIDs":[{"value":"nope"}]}"#)
        #expect(unknown.json["results"]?.arrayValue?.first?["serverErrorCode"]?.stringValue == "NOT_FOUND", "\(unknown)")
        let malformed = try await HTTP.post(s.url("records/resolve", db: "public"), #"{"shortGUIDs":[{}]}"#)
        #expect(malformed.serverErrorCode == "BAD_REQUEST" && malformed.reason.contains("shortGUIDs[0].value"), "\(malformed)")
    }
}
