import CloudletCore
import CloudletWire
import Testing

/// Zone IDs as CloudKit Web Services writes them: the public database's zones are owned by `_defaultOwner`, a private
/// zone by its user's record name, in every response (errors and deletions included), each with its `zoneType`; and
/// every spelling of "the default owner" a client may send is accepted.
@Suite(.liveServer) struct ZoneOwnerNamesTests {
    /// Every `zoneID` object anywhere in `json`.
    static func zoneIDs(in json: JSONValue) -> [JSONValue] {
        switch json {
        case .object(let o):
            return o.flatMap { k, v in (k == "zoneID" ? [v] : []) + zoneIDs(in: v) }
        case .array(let a): return a.flatMap(zoneIDs(in:))
        default: return []
        }
    }

    /// Checks that `reply` is 200, has at least one zone ID, and that each names `owner` and the right zone type.
    static func expectZoneIDs(_ reply: Reply, owner: String, _ what: String) {
        #expect(reply.status == 200, "\(what): \(reply)")
        let ids = zoneIDs(in: reply.json)
        #expect(!ids.isEmpty, "\(what): no zoneID in \(reply)")
        for id in ids {
            #expect(id["ownerRecordName"]?.stringValue == owner, "\(what): \(reply)")
            let name = id["zoneName"]?.stringValue
            #expect(id["zoneType"]?.stringValue == (name == "_defaultZone" ? "DEFAULT_ZONE" : "REGULAR_CUSTOM_ZONE"), "\(what): \(reply)")
        }
    }

    /// The zone ID spellings of the public default zone a client may send.
    static let publicSpellings = [
        "", #","zoneID":{"zoneName":"_defaultZone"}"#,
        #","zoneID":{"zoneName":"_defaultZone","ownerRecordName":"_defaultOwner","zoneType":"DEFAULT_ZONE"}"#,
        #","zoneID":{"zoneName":"_defaultZone","ownerRecordName":"__defaultOwner__"}"#,
        #","zoneID":{"zoneName":"_defaultZone","ownerRecordName":""}"#,
        #","zoneID":{"zoneName":"_defaultZone","ownerName":"_defaultOwner"}"#,
    ]

    @Test func publicResponsesNameTheOwnerDefaultOwnerWithTheZoneType() async throws {
        let s = try live
        for (i, zone) in Self.publicSpellings.enumerated() {
            let n = unique("pub\(i)")
            let created = try await HTTP.post(s.url("records/modify", db: "public"), #"{"operations":[\#(createOp(n))]\#(zone)}"#)
            Self.expectZoneIDs(created, owner: "_defaultOwner", "create with zone \(zone)")
            #expect(created.records.first?["recordChangeTag"] != nil, "create with zone \(zone): \(created)")
            let looked = try await HTTP.post(s.url("records/lookup", db: "public"), #"{"records":[{"recordName":"\#(n)"}]\#(zone)}"#)
            Self.expectZoneIDs(looked, owner: "_defaultOwner", "lookup with zone \(zone)")
            #expect(looked.records.first?["recordType"]?.stringValue == "Note", "lookup with zone \(zone): \(looked)")
            let queried = try await HTTP.post(
                s.url("records/query", db: "public"),
                #"{"query":{"recordType":"Note"},"resultsLimit":5\#(zone)}"#)
            Self.expectZoneIDs(queried, owner: "_defaultOwner", "query with zone \(zone)")
            let deleted = try await HTTP.post(
                s.url("records/modify", db: "public"), #"{"operations":[{"operationType":"forceDelete","record":{"recordName":"\#(n)"}}]\#(zone)}"#)
            Self.expectZoneIDs(deleted, owner: "_defaultOwner", "delete with zone \(zone)")
            #expect(deleted.records.first?["deleted"]?.boolValue == true, "delete with zone \(zone): \(deleted)")
        }
        Self.expectZoneIDs(try await HTTP.get(s.url("zones/list", db: "public")), owner: "_defaultOwner", "zones/list")
        let lookup = try await HTTP.post(
            s.url("zones/lookup", db: "public"), #"{"zones":[{"zoneName":"_defaultZone","ownerRecordName":"_defaultOwner"}]}"#)
        Self.expectZoneIDs(lookup, owner: "_defaultOwner", "zones/lookup")
        #expect(lookup.zones.first?["serverErrorCode"] == nil, "\(lookup)")
    }

    @Test func privateResponsesNameTheUserInEveryResponseErrorsAndDeletionsIncluded() async throws {
        let s = try live
        let me = s.alice.user.userRecordName
        let zone = unique("Z")
        let spellings = [
            #"{"zoneName":"\#(zone)"}"#, #"{"zoneName":"\#(zone)","ownerRecordName":"_defaultOwner"}"#,
            #"{"zoneName":"\#(zone)","ownerRecordName":"__defaultOwner__","zoneType":"REGULAR_CUSTOM_ZONE"}"#,
            #"{"zoneName":"\#(zone)","ownerRecordName":"\#(me)","zoneType":"SOMETHING_ELSE"}"#,
        ]
        let made = try await HTTP.post(
            s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":\#(spellings[1])}}]}"#)
        Self.expectZoneIDs(made, owner: me, "zones/modify create")
        for (i, z) in spellings.enumerated() {
            let n = unique("priv\(i)")
            Self.expectZoneIDs(
                try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp(n))],"zoneID":\#(z)}"#), owner: me,
                "create in \(z)")
            Self.expectZoneIDs(
                try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"\#(n)"}],"zoneID":\#(z)}"#), owner: me,
                "lookup in \(z)")
            Self.expectZoneIDs(
                try await HTTP.post(s.url("zones/lookup"), #"{"zones":[\#(z)]}"#), owner: me, "zones/lookup of \(z)")
            Self.expectZoneIDs(
                try await HTTP.post(s.url("changes/zone"), #"{"zones":[{"zoneID":\#(z)}]}"#), owner: me, "changes/zone of \(z)")
            let deleted = try await HTTP.post(
                s.url("records/modify"), #"{"operations":[{"operationType":"forceDelete","record":{"recordName":"\#(n)"}}],"zoneID":\#(z)}"#)
            Self.expectZoneIDs(deleted, owner: me, "delete in \(z)")
            #expect(deleted.records.first?["deleted"]?.boolValue == true, "\(deleted)")
        }
        Self.expectZoneIDs(try await HTTP.post(s.url("changes/database"), "{}"), owner: me, "changes/database")
        Self.expectZoneIDs(try await HTTP.get(s.url("zones/list")), owner: me, "zones/list")
        let sub = try await HTTP.post(
            s.url("subscriptions/modify"),
            #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"\#(unique("s"))","subscriptionType":"zone","zoneID":\#(spellings[2])}}]}"#)
        Self.expectZoneIDs(sub, owner: me, "subscriptions/modify")
        // Errors about a zone name the zone by its owner too, whichever spelling the request used.
        let missing = #"{"zoneName":"\#(unique("missing"))","ownerRecordName":"__defaultOwner__"}"#
        let lookupMissing = try await HTTP.post(s.url("zones/lookup"), #"{"zones":[\#(missing)]}"#)
        Self.expectZoneIDs(lookupMissing, owner: me, "zones/lookup of a missing zone")
        #expect(lookupMissing.zones.first?["serverErrorCode"]?.stringValue == "ZONE_NOT_FOUND", "\(lookupMissing)")
        let changesMissing = try await HTTP.post(s.url("changes/zone"), #"{"zones":[{"zoneID":\#(missing)}]}"#)
        Self.expectZoneIDs(changesMissing, owner: me, "changes/zone of a missing zone")
        let deleteMissing = try await HTTP.post(
            s.url("zones/modify"), #"{"operations":[{"operationType":"delete","zone":{"zoneID":\#(missing)}}]}"#)
        Self.expectZoneIDs(deleteMissing, owner: me, "zones/modify delete of a missing zone")
        let gone = try await HTTP.post(
            s.url("zones/modify"), #"{"operations":[{"operationType":"delete","zone":{"zoneID":\#(spellings[0])}}]}"#)
        Self.expectZoneIDs(gone, owner: me, "zones/modify delete")
        #expect(gone.zones.first?["deleted"]?.boolValue == true, "\(gone)")
    }

    @Test func zoneIDDecodingMapsEverySpellingOfTheDefaultOwnerAndIgnoresTheZoneType() throws {
        for owner in [nil, "", "_defaultOwner", "__defaultOwner__"] {
            var o: [String: JSONValue] = ["zoneName": .string("Z"), "zoneType": .string("REGULAR_CUSTOM_ZONE")]
            if let owner { o["ownerRecordName"] = .string(owner) }
            #expect(try ZoneIDCoding.decode(.object(o), at: "zoneID") == ZoneID(zoneName: "Z"), "\(owner ?? "nil")")
        }
        let alice = try ZoneIDCoding.decode(.object(["zoneName": .string("Z"), "ownerName": .string("_alice")]), at: "z")
        #expect(alice == ZoneID(zoneName: "Z", ownerName: "_alice"))
        var w = JSONWriter()
        ZoneIDCoding.write(ZoneID(zoneName: "_defaultZone"), to: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self)
            == #"{"zoneName":"_defaultZone","ownerRecordName":"_defaultOwner","zoneType":"DEFAULT_ZONE"}"#)
    }
}
