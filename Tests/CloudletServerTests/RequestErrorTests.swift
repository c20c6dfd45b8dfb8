import CloudletWire
import Cloudlet
import Foundation
import Testing

@testable import CloudletServer

/// Requests that are wrong as a whole: each gets a 4xx with CloudKit's error body and a reason naming what was
/// wrong, and nothing of it is written.
@Suite(.liveServer) struct RequestErrorTests {
    /// One bad request: how to send it and what must come back.
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var path: @Sendable (LiveServer) -> String
        var body: String?
        var status: Int
        var code: String
        var reasonContains: String
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "malformed JSON", path: { $0.url("records/modify") }, body: #"{"operations":["#, status: 400,
             code: "BAD_REQUEST", reasonContains: "not valid JSON"),
        Case(name: "JSON that is not an object", path: { $0.url("records/modify") }, body: "[1,2]", status: 400,
             code: "BAD_REQUEST", reasonContains: "must be a JSON object"),
        Case(name: "empty body", path: { $0.url("records/lookup") }, body: nil, status: 400, code: "BAD_REQUEST",
             reasonContains: "body is empty"),
        Case(name: "operations missing", path: { $0.url("records/modify") }, body: "{}", status: 400,
             code: "BAD_REQUEST", reasonContains: "operations is missing"),
        Case(name: "unknown operationType", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"upsert","record":{"recordName":"u","recordType":"Note"}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "operations[0].operationType 'upsert'"),
        Case(name: "missing recordName in update", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"update","record":{"recordType":"Note","recordChangeTag":"1"}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "operations[0].record.recordName is missing"),
        Case(name: "missing recordName in lookup", path: { $0.url("records/lookup") },
             body: #"{"records":[{"recordName":"a"},{"desiredKeys":[]}]}"#, status: 400, code: "BAD_REQUEST",
             reasonContains: "records[1].recordName is missing"),
        Case(name: "missing recordType in create", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"create","record":{"recordName":"n"}}]}"#, status: 400,
             code: "BAD_REQUEST", reasonContains: "recordType is missing"),
        Case(name: "type tag that does not match the value", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"create","record":{"recordName":"n","recordType":"Note","fields":{"n":{"value":"abc","type":"INT64"}}}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "operations[0].record.fields.n.value is a string, which is not a valid INT64"),
        Case(name: "fraction for an INT64", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"create","record":{"recordName":"n","recordType":"Note","fields":{"n":{"value":1.5,"type":"INT64"}}}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "not a valid INT64"),
        Case(name: "unknown type tag", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"create","record":{"recordName":"n","recordType":"Note","fields":{"f":{"value":true,"type":"BOOLEAN"}}}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "type 'BOOLEAN' is not a CloudKit field type"),
        Case(name: "bad base64", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"create","record":{"recordName":"n","recordType":"Note","fields":{"b":{"value":"***","type":"BYTES"}}}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "fields.b.value is not valid base64"),
        Case(name: "location without longitude", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"create","record":{"recordName":"n","recordType":"Note","fields":{"l":{"value":{"latitude":1},"type":"LOCATION"}}}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "needs latitude and longitude"),
        Case(name: "reference into another zone", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"create","record":{"recordName":"n","recordType":"Note","fields":{"r":{"value":{"recordName":"x","zoneID":{"zoneName":"Other"}},"type":"REFERENCE"}}}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "references must stay in the record's zone"),
        Case(name: "list of mixed types", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"create","record":{"recordName":"n","recordType":"Note","fields":{"l":{"value":["a",1]}}}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "mixes STRING and INT64"),
        Case(name: "null value", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"create","record":{"recordName":"n","recordType":"Note","fields":{"x":{"value":null}}}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "fields.x.value is null"),
        Case(name: "zoneID without zoneName", path: { $0.url("records/lookup") },
             body: #"{"zoneID":{"ownerRecordName":"x"},"records":[{"recordName":"a"}]}"#, status: 400, code: "BAD_REQUEST",
             reasonContains: "zoneID.zoneName is missing"),
        Case(name: "201 operations", path: { $0.url("records/modify") },
             body: #"{"operations":[\#((0..<201).map { createOp("bulk-\($0)") }.joined(separator: ","))]}"#, status: 400,
             code: "BAD_REQUEST", reasonContains: "201 operations in one request; the limit is 200"),
        Case(name: "201 lookups", path: { $0.url("records/lookup") },
             body: #"{"records":[\#((0..<201).map { #"{"recordName":"r\#($0)"}"# }.joined(separator: ","))]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "201 records in one lookup; the limit is 200"),
        Case(name: "unknown zone operationType", path: { $0.url("zones/modify") },
             body: #"{"operations":[{"operationType":"rename","zone":{"zoneID":{"zoneName":"Z"}}}]}"#, status: 400,
             code: "BAD_REQUEST", reasonContains: "'rename' is not 'create' or 'delete'"),
        Case(name: "a null zone ID in zones/lookup", path: { $0.url("zones/lookup") }, body: #"{"zones":[null]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "zones[0] is missing"),
        Case(name: "a null zone ID in zones/modify", path: { $0.url("zones/modify") },
             body: #"{"operations":[{"operationType":"create","zone":{"zoneID":null}}]}"#, status: 400,
             code: "BAD_REQUEST", reasonContains: "operations[0].zone.zoneID is missing"),
        Case(name: "a zone ID that is not an object", path: { $0.url("zones/lookup") }, body: #"{"zones":["Z"]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "zones[0] must be a JSON object, not a string"),
        Case(name: "unknown environment", path: { $0.url("records/lookup", environment: "staging") },
             body: #"{"records":[]}"#, status: 400, code: "BAD_REQUEST", reasonContains: "environment 'staging'"),
        Case(name: "unknown database", path: { $0.url("records/lookup", db: "secret") }, body: #"{"records":[]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "database 'secret'"),
        Case(name: "container that is not an iCloud identifier", path: { $0.url("records/lookup", container: "com.example.app") },
             body: #"{"records":[]}"#, status: 400, code: "BAD_REQUEST", reasonContains: "container identifier 'com.example.app' is invalid"),
        // Answered as a container the server knows would be: an API token reveals no other container.
        Case(name: "container the server does not know", path: { $0.url("records/lookup", container: "iCloud.com.example.nobody") },
             body: #"{"records":[]}"#, status: 403, code: "ACCESS_DENIED",
             reasonContains: "not 'iCloud.com.example.nobody'"),
        Case(name: "protocol version 2", path: { $0.url("records/lookup").replacingOccurrences(of: "/database/1/", with: "/database/2/") },
             body: #"{"records":[]}"#, status: 400, code: "BAD_REQUEST", reasonContains: "protocol version '2'"),
        Case(name: "JSON nested 65 deep", path: { $0.url("records/modify") },
             body: String(repeating: "[", count: 65) + String(repeating: "]", count: 65), status: 400,
             code: "BAD_REQUEST", reasonContains: "nesting deeper than 64 levels"),
        Case(name: "JSON nested 64 deep (parsed, then refused as a record)", path: { $0.url("records/modify") },
             body: #"{"operations":[{"operationType":"create","record":{"recordName":"deep","recordType":"Note","fields":{"f":{"value":\#(String(repeating: "[", count: 58))1\#(String(repeating: "]", count: 58))}}}}]}"#,
             status: 400, code: "BAD_REQUEST", reasonContains: "a list cannot contain a list"),
        Case(name: "an operation we do not serve", path: { $0.url("assets/download") }, body: "{}", status: 404,
             code: "NOT_FOUND", reasonContains: "'assets/download' is not supported"),
        Case(name: "a path outside the API", path: { "\($0.server.url)/nothing/here" }, body: "{}", status: 404,
             code: "NOT_FOUND", reasonContains: "no endpoint at '/nothing/here'"),
    ]

    @Test(arguments: cases) func isRefusedWithAReason(_ c: Case) async throws {
        let s = try live
        let r = try await HTTP.send("POST", c.path(s), body: c.body.map { Array($0.utf8) })
        #expect(r.status == c.status, "\(r)")
        #expect(r.serverErrorCode == c.code, "\(r)")
        #expect(r.reason.contains(c.reasonContains), "\(r)")
        #expect(r.json["uuid"]?.stringValue?.count == 36)
    }

    @Test func nothingOfARefusedRequestIsWritten() async throws {
        let s = try live
        let good = unique("good")
        let badOps = [
            #"{"operationType":"upsert","record":{"recordName":"x","recordType":"Note"}}"#,
            #"{"operationType":"create","record":{"recordName":"x","recordType":"Note","fields":{"n":{"value":"abc","type":"INT64"}}}}"#,
        ]
        for bad in badOps {
            let r = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp(good)),\#(bad)]}"#)
            #expect(r.status == 400, "\(r)")
        }
        let many = (0..<201).map { createOp("\(good)-\($0)") }.joined(separator: ",")
        #expect(try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(many)]}"#).status == 400)
        let lookup = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"\#(good)"},{"recordName":"\#(good)-0"}]}"#)
        #expect(lookup.records.map { $0["serverErrorCode"]?.stringValue } == ["NOT_FOUND", "NOT_FOUND"])
    }

    @Test func aBodyOverTheLimitIs413AndTheConnectionStaysUsable() async throws {
        let s = try live
        let n = unique("huge")
        let filler = String(repeating: "y", count: 5 << 20)
        let r = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp(n, fields: #""b":{"value":"\#(filler)"}"#))]}"#)
        #expect(r.status == 413, "\(r)")
        #expect(r.serverErrorCode == "BAD_REQUEST")
        #expect(r.reason.contains("the limit is \(4 << 20) bytes"), "\(r)")
        let after = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"\#(n)"}]}"#)
        #expect(after.status == 200)
        #expect(after.records.first?["serverErrorCode"]?.stringValue == "NOT_FOUND")
    }

    @Test func modifyNeedsPOST() async throws {
        let s = try live
        let r = try await HTTP.get(s.url("records/modify"))
        #expect(r.status == 400 && r.reason.contains("records/modify takes POST, not GET"), "\(r)")
    }
}
