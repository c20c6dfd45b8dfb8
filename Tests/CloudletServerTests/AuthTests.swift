import CloudletWire
import Cloudlet
import Foundation
import Testing

@testable import CloudletServer

/// `ckAPIToken` / `ckWebAuthToken` rules, and that no user can reach another user's private database.
@Suite(.liveServer) struct AuthTests {
    @Test func aMissingOrUnknownAPITokenIsAuthenticationFailed() async throws {
        let s = try live
        let base = "\(s.server.url)/database/1/\(LiveServer.container)/development/public/records/lookup"
        let body = #"{"records":[{"recordName":"a"}]}"#
        let missing = try await HTTP.post(base, body)
        #expect(missing.status == 401 && missing.serverErrorCode == "AUTHENTICATION_FAILED", "\(missing)")
        #expect(missing.reason.contains("ckAPIToken query parameter is missing"))
        for bad in [String(repeating: "0", count: 64), "not-a-token", s.alice.token] {
            let r = try await HTTP.post(base + "?ckAPIToken=\(bad)", body)
            #expect(r.status == 401 && r.serverErrorCode == "AUTHENTICATION_FAILED", "\(r)")
        }
        let s2s = try await HTTP.send(
            "POST", base, body: Array(body.utf8), headers: ["X-Apple-CloudKit-Request-KeyID": "abc"])
        #expect(s2s.status == 401 && s2s.reason.contains("X-Apple-CloudKit-Request-ISO8601Date"), "\(s2s)")
    }

    @Test func aTokenForAnotherContainerIsAccessDenied() async throws {
        let s = try live
        let r = try await HTTP.post(s.url("records/lookup", db: "public", as: nil, apiToken: s.otherAPIToken), #"{"records":[]}"#)
        #expect(r.status == 403 && r.serverErrorCode == "ACCESS_DENIED", "\(r)")
        #expect(r.reason.contains(LiveServer.otherContainer) && r.reason.contains(LiveServer.container))
        // The token works for its own container.
        let own = try await HTTP.post(
            s.url("records/lookup", db: "public", as: nil, container: LiveServer.otherContainer, apiToken: s.otherAPIToken),
            #"{"records":[]}"#)
        #expect(own.status == 200, "\(own)")
    }

    @Test func anUnknownWebAuthTokenIsAuthenticationFailed() async throws {
        let s = try live
        for bad in [String(repeating: "a", count: 64), s.apiToken, "x"] {
            let r = try await HTTP.post(s.url("records/lookup", as: bad), #"{"records":[]}"#)
            #expect(r.status == 401 && r.serverErrorCode == "AUTHENTICATION_FAILED" && r.reason.contains("ckWebAuthToken"), "\(r)")
        }
    }

    /// The token cache is keyed by the token's text: once a token is cached, one that differs from it (a character
    /// changed, added or dropped) still gets the store's answer, and the same token spelled with percent-escapes is
    /// the same token.
    @Test func aCachedTokenMatchesOnlyItself() async throws {
        let s = try live
        let body = #"{"records":[]}"#
        #expect(try await HTTP.post(s.url("records/lookup"), body).status == 200)  // both tokens cached now
        let (api, web) = (s.apiToken, s.alice.token)
        func changed(_ t: String) -> String { String(t.dropLast()) + (t.last == "0" ? "1" : "0") }
        for bad in [changed(api), String(api.dropLast()), api + "0", String(api.dropFirst()), api.uppercased()] {
            let r = try await HTTP.post(s.url("records/lookup", apiToken: bad), body)
            #expect(r.status == 401 && r.serverErrorCode == "AUTHENTICATION_FAILED" && r.reason.contains("ckAPIToken"), "\(bad): \(r)")
        }
        for bad in [changed(web), String(web.dropLast()), web + "0", String(web.dropFirst()), web.uppercased()] {
            let r = try await HTTP.post(s.url("records/lookup", as: bad), body)
            #expect(r.status == 401 && r.serverErrorCode == "AUTHENTICATION_FAILED" && r.reason.contains("ckWebAuthToken"), "\(bad): \(r)")
        }
        let escaped = { (t: String) in t.utf8.map { String(format: "%%%02X", $0) }.joined() }
        let r = try await HTTP.post(s.url("records/lookup", as: escaped(web), apiToken: escaped(api)), body)
        #expect(r.status == 200, "\(r)")
    }

    @Test(arguments: [
        ("records/lookup", "private", #"{"records":[]}"#), ("zones/list", "private", "{}"), ("records/lookup", "shared", #"{"records":[]}"#),
        ("records/modify", "public", #"{"operations":[]}"#), ("zones/modify", "public", #"{"operations":[]}"#),
        ("users/caller", "public", "{}"), ("users/current", "public", "{}"),
    ])
    func withoutAUserItIsAuthenticationRequiredWithARedirect(op: String, db: String, body: String) async throws {
        let s = try live
        let r = try await HTTP.post(s.url(op, db: db, as: nil), body)
        #expect(r.status == 421 && r.serverErrorCode == "AUTHENTICATION_REQUIRED", "\(r)")
        let redirect = try #require(r.json["redirectURL"]?.stringValue)
        #expect(redirect.hasPrefix(s.server.url + "/cloudlet/signin"))
        let page = try await HTTP.get(redirect)
        #expect(page.status == 200 && page.text.contains("cloudlet user add"))
    }

    @Test func thePublicDatabaseIsReadableWithTheAPITokenAloneAndWritableByUsers() async throws {
        let s = try live
        let n = unique("pub")
        let write = try await HTTP.post(s.url("records/modify", db: "public", as: "bob"), #"{"operations":[\#(createOp(n))]}"#)
        #expect(write.records.first?["created"]?["userRecordName"]?.stringValue == s.bob.user.userRecordName, "\(write)")
        #expect(write.records.first?["zoneID"]?["ownerRecordName"]?.stringValue == "_defaultOwner", "\(write)")
        let read = try await HTTP.post(s.url("records/lookup", db: "public", as: nil), #"{"records":[{"recordName":"\#(n)"}]}"#)
        #expect(read.status == 200 && read.records.first?["recordName"]?.stringValue == n, "\(read)")
        let zones = try await HTTP.get(s.url("zones/list", db: "public", as: nil))
        #expect(zones.zones.map { $0["zoneID"]?["zoneName"]?.stringValue } == ["_defaultZone"], "\(zones)")
        #expect(try await HTTP.post(s.url("records/lookup", db: "public", as: nil, environment: "production"), #"{"records":[{"recordName":"\#(n)"}]}"#)
            .records.first?["serverErrorCode"]?.stringValue == "NOT_FOUND")
    }

    @Test func usersCallerAndCurrentDescribeTheSignedInUser() async throws {
        let s = try live
        let caller = try await HTTP.get(s.url("users/caller", db: "public"))
        #expect(caller.status == 200, "\(caller)")
        #expect(caller.json["userRecordName"]?.stringValue == s.alice.user.userRecordName)
        #expect(caller.json["nameComponents"]?["givenName"]?.stringValue == "alice")
        #expect(caller.json["lookupInfo"]?["userRecordName"]?.stringValue == s.alice.user.userRecordName)
        let current = try await HTTP.post(s.url("users/current", db: "private", as: "bob"), "")
        #expect(current.json["userRecordName"]?.stringValue == s.bob.user.userRecordName, "\(current)")
        #expect(current.json["firstName"]?.stringValue == "bob")
        #expect(s.alice.user.userRecordName.hasPrefix("_") && s.alice.user.userRecordName.count == 33)
    }

    @Test func aUserCannotReadOrWriteAnotherUsersPrivateDatabase() async throws {
        let s = try live
        let aliceURN = s.alice.user.userRecordName
        let secret = unique("secret"), zone = unique("AliceZone")
        _ = try await HTTP.post(s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(zone)"}}}]}"#)
        let seeded = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp(secret, fields: #""v":{"value":"alice's"}"#))]}"#)
        #expect(seeded.records.first?["serverErrorCode"] == nil)
        _ = try await HTTP.post(s.url("records/modify"), #"{"zoneID":{"zoneName":"\#(zone)"},"operations":[\#(createOp(secret))]}"#)

        // Alice may name herself as the owner.
        let own = try await HTTP.post(
            s.url("records/lookup"), #"{"zoneID":{"zoneName":"_defaultZone","ownerRecordName":"\#(aliceURN)"},"records":[{"recordName":"\#(secret)"}]}"#)
        #expect(own.records.first?["fields"]?["v"]?["value"]?.stringValue == "alice's", "\(own)")

        // Bob: his own database does not have it…
        let plain = try await HTTP.post(s.url("records/lookup", as: "bob"), #"{"records":[{"recordName":"\#(secret)"}]}"#)
        #expect(plain.records.first?["serverErrorCode"]?.stringValue == "NOT_FOUND")
        // …and naming Alice as the owner (either spelling), in any zone, reaches nothing of hers.
        for ownerKey in ["ownerRecordName", "ownerName"] {
            for zoneName in ["_defaultZone", zone] {
                let zoneID = #"{"zoneName":"\#(zoneName)","\#(ownerKey)":"\#(aliceURN)"}"#
                let read = try await HTTP.post(s.url("records/lookup", as: "bob"), #"{"zoneID":\#(zoneID),"records":[{"recordName":"\#(secret)"}]}"#)
                #expect(read.records.first?["serverErrorCode"]?.stringValue == "ZONE_NOT_FOUND", "\(read)")
                for op in ["forceUpdate", "forceReplace", "forceDelete"] {
                    let write = try await HTTP.post(
                        s.url("records/modify", as: "bob"),
                        #"{"zoneID":\#(zoneID),"operations":[{"operationType":"\#(op)","record":{"recordName":"\#(secret)","recordType":"Note","fields":{"v":{"value":"bob was here"}}}}]}"#)
                    #expect(write.records.first?["serverErrorCode"]?.stringValue == "ZONE_NOT_FOUND", "\(op): \(write)")
                }
                // A zoneID on the record itself is resolved the same way.
                let recordZone = try await HTTP.post(
                    s.url("records/modify", as: "bob"),
                    #"{"operations":[{"operationType":"forceUpdate","record":{"recordName":"\#(secret)","recordType":"Note","zoneID":\#(zoneID),"fields":{}}}]}"#)
                #expect(recordZone.records.first?["serverErrorCode"]?.stringValue == "ZONE_NOT_FOUND", "\(recordZone)")
                let zoneLookup = try await HTTP.post(s.url("zones/lookup", as: "bob"), #"{"zones":[\#(zoneID)]}"#)
                #expect(zoneLookup.zones.first?["serverErrorCode"]?.stringValue == "ZONE_NOT_FOUND", "\(zoneLookup)")
            }
            let deleteZone = try await HTTP.post(
                s.url("zones/modify", as: "bob"),
                #"{"operations":[{"operationType":"delete","zone":{"zoneID":{"zoneName":"\#(zone)","\#(ownerKey)":"\#(aliceURN)"}}}]}"#)
            #expect(deleteZone.zones.first?["serverErrorCode"]?.stringValue == "ZONE_NOT_FOUND", "\(deleteZone)")
        }
        let bobsZones = try await HTTP.get(s.url("zones/list", as: "bob"))
        #expect(!bobsZones.zones.contains { $0["zoneID"]?["zoneName"]?.stringValue == zone })

        // Bob's record of the same name is his own; Alice's is untouched.
        _ = try await HTTP.post(s.url("records/modify", as: "bob"), #"{"operations":[\#(createOp(secret, fields: #""v":{"value":"bob's"}"#))]}"#)
        let after = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"\#(secret)"}]}"#)
        #expect(after.records.first?["fields"]?["v"]?["value"]?.stringValue == "alice's")
        #expect(after.records.first?["modified"]?["userRecordName"]?.stringValue == aliceURN)
        let alicesZones = try await HTTP.get(s.url("zones/list"))
        #expect(alicesZones.zones.contains { $0["zoneID"]?["zoneName"]?.stringValue == zone })
    }
}
