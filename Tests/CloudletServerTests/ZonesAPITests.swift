import Cloudlet
import Foundation
import Testing

@testable import CloudletServer

/// `zones/list`, `zones/lookup` and `zones/modify`.
@Suite(.liveServer) struct ZonesAPITests {
    @Test func createListLookupAndDelete() async throws {
        let s = try live
        let a = unique("ZoneA"), b = unique("ZoneB")
        let created = try await HTTP.post(
            s.url("zones/modify", as: "bob"),
            #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(a)"}}},{"operationType":"create","zone":{"zoneName":"\#(b)"}}]}"#)
        #expect(created.status == 200, "\(created)")
        #expect(created.zones.map { $0["zoneID"]?["zoneName"]?.stringValue } == [a, b])
        #expect(created.zones.first?["zoneID"]?["ownerRecordName"]?.stringValue == s.bob.user.userRecordName)

        let list = try await HTTP.get(s.url("zones/list", as: "bob"))
        let names = list.zones.compactMap { $0["zoneID"]?["zoneName"]?.stringValue }
        #expect(names.first == "_defaultZone" && names.contains(a) && names.contains(b), "\(list)")
        #expect(list.zones.first?["atomic"] == .bool(false))

        _ = try await HTTP.post(s.url("records/modify", as: "bob"), #"{"zoneID":{"zoneName":"\#(a)"},"operations":[\#(createOp("in-a"))]}"#)
        let deleted = try await HTTP.post(
            s.url("zones/modify", as: "bob"),
            #"{"operations":[{"operationType":"delete","zone":{"zoneID":{"zoneName":"\#(a)"}}},{"operationType":"delete","zone":{"zoneID":{"zoneName":"_defaultZone"}}}]}"#)
        #expect(deleted.zones.first?["deleted"] == .bool(true), "\(deleted)")
        #expect(deleted.zones.last?["serverErrorCode"]?.stringValue == "BAD_REQUEST")

        let lookup = try await HTTP.post(
            s.url("zones/lookup", as: "bob"), #"{"zones":[{"zoneName":"\#(a)"},{"zoneName":"\#(b)"},{"zoneName":"_defaultZone"}]}"#)
        #expect(lookup.zones.map { $0["serverErrorCode"]?.stringValue } == ["ZONE_NOT_FOUND", nil, nil], "\(lookup)")
        #expect(lookup.zones[0]["zoneID"]?["zoneName"]?.stringValue == a)
        let record = try await HTTP.post(s.url("records/lookup", as: "bob"), #"{"zoneID":{"zoneName":"\#(a)"},"records":[{"recordName":"in-a"}]}"#)
        #expect(record.records.first?["serverErrorCode"]?.stringValue == "ZONE_NOT_FOUND")
    }

    @Test func customZonesExistOnlyInPrivateDatabases() async throws {
        let s = try live
        let r = try await HTTP.post(
            s.url("zones/modify", db: "public"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"Pub"}}}]}"#)
        #expect(r.status == 200)
        #expect(r.zones.first?["serverErrorCode"]?.stringValue == "BAD_REQUEST", "\(r)")
        #expect(r.zones.first?["reason"]?.stringValue?.contains("private database") == true)
        let bad = try await HTTP.post(
            s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"_reserved"}}}]}"#)
        #expect(bad.zones.first?["serverErrorCode"]?.stringValue == "BAD_REQUEST", "\(bad)")
    }
}
