import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// Per-caller rate limits (`THROTTLED` with `retryAfter`) and per-user storage quotas (`QUOTA_EXCEEDED`), both
/// counted in metrics. Bounded in time: the limits are set so that nothing refills during a test.
@Suite struct LimitsTests {
    func metric(_ s: LiveServer, _ name: String) async throws -> Double? {
        let r = try await HTTP.send("GET", s.server.url + "/cloudlet/metrics", headers: HTTP.bearer(s.adminToken))
        return r.text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last!) }
    }

    @Test func aCallerOverItsRateIsThrottledAndOthersAreNot() async throws {
        // One request in 1000 s sustained, 3 at once: the fourth within the test is over.
        let s = try await LiveServer.start { $0.rateLimit = .init(requestsPerSecond: 0.001, burst: 3) }
        try await withCleanup({ await s.shutdown() }) {
            let body = #"{"records":[]}"#
            for _ in 0..<3 { #expect(try await HTTP.post(s.url("records/lookup", as: "alice"), body).status == 200) }
            let over = try await HTTP.post(s.url("records/lookup", as: "alice"), body)
            #expect(over.status == 429 && over.serverErrorCode == "THROTTLED", "\(over)")
            let retryAfter = try #require(over.json["retryAfter"]?.numberValue?.int64, "\(over)")
            #expect(retryAfter > 0 && retryAfter <= 1000)
            // Bob, and the API token used alone, have buckets of their own.
            #expect(try await HTTP.post(s.url("records/lookup", as: "bob"), body).status == 200)
            #expect(try await HTTP.post(s.url("records/lookup", db: "public", as: nil), body).status == 200)
            #expect(try await metric(s, "cloudlet_http_throttled_total") == 1)
        }
    }

    @Test func aSaveOverTheUsersQuotaIsRefusedWholeAndDeletesStillWork() async throws {
        let s = try await LiveServer.start { $0.userQuota = 4000 }
        try await withCleanup({ await s.shutdown() }) {
            let big = String(repeating: "x", count: 1500)
            func save(_ name: String, as user: String = "alice") async throws -> Reply {
                try await HTTP.post(s.url("records/modify", as: user), #"{"operations":[\#(createOp(name, fields: #""body":{"value":"\#(big)"}"#))]}"#)
            }
            #expect(try await save("a").status == 200)
            #expect(try await save("b").status == 200)
            let over = try await save("c")
            #expect(over.status == 413 && over.serverErrorCode == "QUOTA_EXCEEDED" && over.reason.contains("4000-byte quota"), "\(over)")
            // Nothing of it was applied.
            let lookup = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"c"}]}"#)
            #expect(lookup.records.first?["serverErrorCode"]?.stringValue == "NOT_FOUND", "\(lookup)")
            // Bob's quota is his own; a deletion makes room again.
            #expect(try await save("c", as: "bob").status == 200)
            let deleted = try await HTTP.post(s.url("records/modify"), #"{"operations":[{"operationType":"forceDelete","record":{"recordName":"a"}}]}"#)
            #expect(deleted.status == 200, "\(deleted)")
            #expect(try await save("c").status == 200)
            #expect(try await metric(s, "cloudlet_quota_exceeded_total") == 1)
            // What bob saves in a zone alice shares with him counts against alice's quota: she owns it.
            let aliceName = s.alice.user.userRecordName
            _ = try await HTTP.post(s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"Shared"}}}]}"#)
            let share = try await HTTP.post(
                s.url("records/modify"),
                #"{"zoneID":{"zoneName":"Shared"},"operations":[{"operationType":"create","record":{"recordName":"cloudkit.zoneshare","recordType":"cloudkit.share","publicPermission":"READ_WRITE"}}]}"#)
            let guid = try #require(share.records.first?["shortGUID"]?.stringValue, "\(share)")
            _ = try await HTTP.post(s.url("records/accept", db: "public", as: "bob"), #"{"shortGUIDs":[{"value":"\#(guid)"}]}"#)
            let intoShared = try await HTTP.post(
                s.url("records/modify", db: "shared", as: "bob"),
                #"{"zoneID":{"zoneName":"Shared","ownerRecordName":"\#(aliceName)"},"operations":[\#(createOp("by-bob", fields: #""body":{"value":"\#(big)"}"#))]}"#)
            #expect(intoShared.status == 413 && intoShared.reason.contains("'\(aliceName)'"), "\(intoShared)")
            // The public database has no per-user quota.
            for n in 0..<4 {
                let op = createOp("p\(n)", fields: #""body":{"value":"\#(big)"}"#)
                #expect(try await HTTP.post(s.url("records/modify", db: "public"), #"{"operations":[\#(op)]}"#).status == 200)
            }
        }
    }
}
