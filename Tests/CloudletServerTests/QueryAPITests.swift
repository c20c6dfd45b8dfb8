import CloudletWire
import Cloudlet
import Foundation
import Testing

@testable import CloudletServer

/// `records/query`, `records/count` and the `/cloudlet/admin/` endpoints over HTTP against a live server.
@Suite(.liveServer) struct QueryAPITests {
    /// Saves `count` records of a fresh type `Item…` into the private database: `n` = i, `name` = "item-i" (i
    /// zero-padded), `kind` = even/odd, `tags` = ["t\(i % 3)", "all"], `text` words, `loc` at (i, i).
    func seed(_ count: Int, zone: String? = nil) async throws -> String {
        let s = try live
        let type = "Item" + unique("").replacingOccurrences(of: "-", with: "")
        var ops: [String] = []
        for i in 0..<count {
            let fields = """
                "n":{"value":\(i)},"name":{"value":"item-\(String(format: "%03d", i))"},
                "kind":{"value":"\(i % 2 == 0 ? "even" : "odd")"},"tags":{"value":["t\(i % 3)","all"]},
                "text":{"value":"\(i % 5 == 0 ? "quick brown fox" : "lazy dog")"},
                "loc":{"value":{"latitude":\(Double(i)),"longitude":\(Double(i))}},
                "ts":{"value":\(1_700_000_000_000 + i),"type":"TIMESTAMP"}
                """
            ops.append(createOp("r\(i)-\(type)", type: type, fields: fields))
        }
        let zoneJSON = zone.map { #","zoneID":{"zoneName":"\#($0)"}"# } ?? ""
        let r = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(ops.joined(separator: ","))]\#(zoneJSON)}"#)
        #expect(r.status == 200, "\(r)")
        #expect(!r.records.contains { $0["serverErrorCode"] != nil }, "\(r)")
        return type
    }

    func query(_ type: String, filters: String = "[]", sort: String = "[]", extra: String = "") async throws -> Reply {
        let s = try live
        return try await HTTP.post(
            s.url("records/query"), #"{"query":{"recordType":"\#(type)","filterBy":\#(filters),"sortBy":\#(sort)}\#(extra)}"#)
    }

    func ns(_ r: Reply) -> [Int64] { r.records.compactMap { $0["fields"]?["n"]?["value"]?.numberValue?.int64 } }

    @Test func representativeComparatorsEndToEnd() async throws {
        let t = try await seed(20)
        let asc = #"[{"fieldName":"n","ascending":true}]"#
        func check(_ filter: String, _ expected: [Int64], sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let r = try await query(t, filters: "[\(filter)]", sort: asc)
            #expect(r.status == 200, "\(r)", sourceLocation: sourceLocation)
            #expect(ns(r) == expected, "\(filter): \(r)", sourceLocation: sourceLocation)
        }
        try await check(#"{"comparator":"EQUALS","fieldName":"n","fieldValue":{"value":7}}"#, [7])
        try await check(#"{"comparator":"EQUALS","fieldName":"kind","fieldValue":{"value":"ODD"}}"#, [1, 3, 5, 7, 9, 11, 13, 15, 17, 19])
        try await check(#"{"comparator":"LESS_THAN","fieldName":"n","fieldValue":{"value":3,"type":"INT64"}}"#, [0, 1, 2])
        try await check(#"{"comparator":"GREATER_THAN_OR_EQUALS","fieldName":"n","fieldValue":{"value":18}}"#, [18, 19])
        try await check(#"{"comparator":"NOT_EQUALS","fieldName":"kind","fieldValue":{"value":"odd"}}"#, [0, 2, 4, 6, 8, 10, 12, 14, 16, 18])
        try await check(#"{"comparator":"IN","fieldName":"n","fieldValue":{"value":[2,4,99],"type":"INT64_LIST"}}"#, [2, 4])
        try await check(#"{"comparator":"IN","fieldName":"n","fieldValue":{"value":[5,6],"type":"INT64"}}"#, [5, 6])
        try await check(#"{"comparator":"BEGINS_WITH","fieldName":"name","fieldValue":{"value":"item-01"}}"#, Array(10...19))
        try await check(#"{"comparator":"LIST_CONTAINS","fieldName":"tags","fieldValue":{"value":"t2"}}"#, [2, 5, 8, 11, 14, 17])
        try await check(#"{"comparator":"LIST_CONTAINS_ANY","fieldName":"tags","fieldValue":{"value":["t0","nope"]}}"#, [0, 3, 6, 9, 12, 15, 18])
        try await check(#"{"comparator":"CONTAINS_ALL_TOKENS","fieldName":"text","fieldValue":{"value":"fox quick"}}"#, [0, 5, 10, 15])
        try await check(#"{"comparator":"NEAR","fieldName":"loc","fieldValue":{"value":{"latitude":3,"longitude":3}},"distance":200}"#, [2, 3, 4])
        // A TIMESTAMP field with an untyped integer: the schema's type is used.
        try await check(#"{"comparator":"LESS_THAN","fieldName":"ts","fieldValue":{"value":1700000000002}}"#, [0, 1])
        // System fields.
        try await check(#"{"comparator":"EQUALS","fieldName":"___recordID","fieldValue":{"value":"r4-\#(t)"}}"#, [4])
        // AND of several, and the OR / NOT extensions.
        try await check(
            #"{"comparator":"GREATER_THAN","fieldName":"n","fieldValue":{"value":10}},{"comparator":"EQUALS","fieldName":"kind","fieldValue":{"value":"even"}}"#,
            [12, 14, 16, 18])
        try await check(
            #"{"or":[[{"comparator":"EQUALS","fieldName":"n","fieldValue":{"value":1}}],[{"comparator":"EQUALS","fieldName":"n","fieldValue":{"value":17}}]]}"#,
            [1, 17])
        try await check(
            #"{"not":[{"comparator":"LESS_THAN","fieldName":"n","fieldValue":{"value":18}}]}"#, [18, 19])
        try await check(#"{"or":[]}"#, [])
    }

    /// Every CloudKit comparator name decodes to the engine's comparator with its field and value.
    @Test func everyComparatorNameMaps() throws {
        for c in Comparator.allCases {
            let value: String
            switch c {
            case .near: value = #"{"value":{"latitude":1,"longitude":2}},"distance":5"#
            case .in, .notIn, .listContainsAny, .notListContainsAny, .listContainsAll, .notListContainsAll:
                value = #"{"value":["a","b"]}"#
            default: value = #"{"value":"a"}"#
            }
            let json = try JSONParser.parse(Array(#"[{"comparator":"\#(c.rawValue)","fieldName":"f","fieldValue":\#(value)}]"#.utf8))
            let p = try FilterCoding.decode(json, at: "query.filterBy", zone: .default)
            guard case .comparison(let cmp) = p else {
                Issue.record("\(c): \(p)")
                continue
            }
            #expect(cmp.comparator == c && cmp.field == "f")
            if c == .near { #expect(cmp.distance == 5) }
            if FilterCoding.listOperand(c) { #expect(cmp.value == .list(.string, [.string("a"), .string("b")])) }
            // And back: write then decode gives the same predicate.
            var w = JSONWriter()
            FilterCoding.write(p, zone: .default, to: &w)
            #expect(try FilterCoding.decode(JSONParser.parse(w.bytes), at: "x", zone: .default) == p)
        }
        let or: Cloudlet.Predicate = .or([.and([.comparison(Comparison("a", .equals, .int64(1))), .comparison(Comparison("b", .lessThan, .string("x")))]), .not(.comparison(Comparison("c", .beginsWith, .string("p"))))])
        var w = JSONWriter()
        FilterCoding.write(or, zone: .default, to: &w)
        #expect(try FilterCoding.decode(JSONParser.parse(w.bytes), at: "x", zone: .default) == or)
    }

    @Test func sortingPagingAndDesiredKeys() async throws {
        let t = try await seed(45)
        let desc = #"[{"fieldName":"n","ascending":false}]"#
        var marker: String?
        var seen: [Int64] = []
        var pages = 0
        repeat {
            let extra = #","resultsLimit":10,"desiredKeys":["n"]"# + (marker.map { #","continuationMarker":"\#($0)""# } ?? "")
            let r = try await query(t, sort: desc, extra: extra)
            #expect(r.status == 200, "\(r)")
            seen += ns(r)
            for rec in r.records { #expect(rec["fields"]?.objectValue?.keys.sorted() == ["n"]) }
            #expect(r.records.first?["recordChangeTag"] != nil)
            marker = r.json["continuationMarker"]?.stringValue
            pages += 1
        } while marker != nil && pages < 10
        #expect(pages == 5)
        #expect(seen == Array((0..<45).reversed()).map(Int64.init))

        // Sort by distance, nearest first.
        let near = try await query(
            t, sort: #"[{"fieldName":"loc","relativeLocation":{"latitude":10,"longitude":10}}]"#, extra: #","resultsLimit":3"#)
        #expect(near.status == 200, "\(near)")
        #expect(ns(near).first == 10 && Set(ns(near).dropFirst()) == [9, 11])

        // Empty desiredKeys: system fields only.
        let none = try await query(t, extra: #","resultsLimit":1,"desiredKeys":[]"#)
        #expect(none.records.first?["fields"]?.objectValue?.isEmpty == true, "\(none)")

        // records/count.
        let count = try await HTTP.post(
            try live.url("records/count"),
            #"{"query":{"recordType":"\#(t)","filterBy":[{"comparator":"LESS_THAN","fieldName":"n","fieldValue":{"value":30}}]}}"#)
        #expect(count.json["count"]?.numberValue?.int64 == 30, "\(count)")
    }

    @Test func zoneWideSearchesEveryZone() async throws {
        let s = try live
        let zone = unique("qz")
        let made = try await HTTP.post(
            s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(zone)"}}}]}"#)
        #expect(made.status == 200, "\(made)")
        let t = try await seed(3)
        // The same type in the custom zone.
        let ops = (10..<13).map { createOp("z\($0)-\(t)", type: t, fields: #""n":{"value":\#($0)}"#) }
        let saved = try await HTTP.post(
            s.url("records/modify"), #"{"operations":[\#(ops.joined(separator: ","))],"zoneID":{"zoneName":"\#(zone)"}}"#)
        #expect(saved.status == 200, "\(saved)")
        let asc = #"[{"fieldName":"n","ascending":true}]"#
        let one = try await query(t, sort: asc)
        #expect(ns(one) == [0, 1, 2])
        let inZone = try await query(t, sort: asc, extra: #","zoneID":{"zoneName":"\#(zone)"}"#)
        #expect(ns(inZone) == [10, 11, 12], "\(inZone)")
        let all = try await query(t, sort: asc, extra: #","zoneWide":true"#)
        #expect(ns(all) == [0, 1, 2, 10, 11, 12], "\(all)")
    }

    @Test func errorsNameTheMember() async throws {
        let t = try await seed(2)
        let bad = try await query(t, filters: #"[{"comparator":"LIKE","fieldName":"n","fieldValue":{"value":1}}]"#)
        #expect(bad.status == 400 && bad.serverErrorCode == "BAD_REQUEST")
        #expect(bad.reason.contains("query.filterBy[0].comparator") && bad.reason.contains("LIKE"), "\(bad)")
        let badType = try await query(t, filters: #"[{"comparator":"EQUALS","fieldName":"n","fieldValue":{"value":1,"type":"NUMBER"}}]"#)
        #expect(badType.status == 400 && badType.reason.contains("query.filterBy[0].fieldValue.type"), "\(badType)")
        let badMarker = try await query(t, extra: #","continuationMarker":"bm90IGEgbWFya2Vy""#)
        #expect(badMarker.status == 400 && badMarker.reason.contains("continuationMarker"), "\(badMarker)")
        let noType = try await HTTP.post(try live.url("records/query"), #"{"query":{}}"#)
        #expect(noType.status == 400 && noType.reason.contains("query.recordType"), "\(noType)")
        let nearNoDistance = try await query(t, filters: #"[{"comparator":"NEAR","fieldName":"loc","fieldValue":{"value":{"latitude":1,"longitude":1}}}]"#)
        #expect(nearNoDistance.status == 400 && nearNoDistance.reason.contains("distance"), "\(nearNoDistance)")
    }

}

/// `/cloudlet/admin/`: its own server, since resetting the development schema would disturb the query tests.
@Suite(.liveServer) struct AdminAPITests {
    func admin(_ op: String, body: String? = nil, method: String = "POST", params: String = "", token: String? = nil) async throws -> Reply {
        let s = try live
        let url = "\(s.server.url)/cloudlet/admin/\(op)?container=\(LiveServer.container)\(params)"
        return try await HTTP.send(method, url, body: body.map { Array($0.utf8) }, headers: HTTP.bearer(token ?? s.adminToken))
    }

    @Test func adminSchemaAndProductionQueries() async throws {
        let s = try live
        let t = "Book" + unique("").replacingOccurrences(of: "-", with: "")
        // Authentication: an admin credential is required; a user's tokens are not one, a made-up one fails.
        let user = try await HTTP.get(
            "\(s.server.url)/cloudlet/admin/schema/export?container=\(LiveServer.container)&ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(s.alice.token)")
        #expect(user.status == 403 && user.serverErrorCode == "ACCESS_DENIED", "\(user)")
        let bogus = try await admin("schema/export", method: "GET", token: String(repeating: "a", count: 64))
        #expect(bogus.status == 401 && bogus.serverErrorCode == "AUTHENTICATION_FAILED", "\(bogus)")

        let imported = try await admin(
            "schema/import", body: "DEFINE SCHEMA RECORD TYPE \(t) (title STRING QUERYABLE SORTABLE, pages INT64);")
        #expect(imported.status == 200, "\(imported)")
        #expect(imported.json["recordTypes"]?.arrayValue == [.string(t)], "\(imported)")
        let exported = try await admin("schema/export", method: "GET")
        #expect(exported.status == 200 && exported.text.contains("RECORD TYPE \(t)"), "\(exported.text)")
        let badImport = try await admin("schema/import", body: "DEFINE SCHEMA RECORD TYPE (")
        #expect(badImport.status == 400 && badImport.reason.contains("line"), "\(badImport)")

        let deployed = try await admin("schema/deploy")
        #expect(deployed.status == 200 && (deployed.json["changes"]?.numberValue?.int64 ?? 0) > 0, "\(deployed)")
        let prodExport = try await admin("schema/export", method: "GET", params: "&environment=production")
        #expect(prodExport.text.contains("RECORD TYPE \(t)"))

        // Production: a query on an unindexed field is refused naming the field; an indexed one runs.
        let prod = s.url("records/query", environment: "production")
        let unindexed = try await HTTP.post(
            prod, #"{"query":{"recordType":"\#(t)","filterBy":[{"comparator":"EQUALS","fieldName":"pages","fieldValue":{"value":3}}]}}"#)
        #expect(unindexed.status == 400 && unindexed.serverErrorCode == "BAD_REQUEST", "\(unindexed)")
        #expect(unindexed.reason.contains("'pages'"), "\(unindexed)")
        let saved = try await HTTP.post(
            s.url("records/modify", environment: "production"),
            #"{"operations":[\#(createOp("b1", type: t, fields: #""title":{"value":"Dune"},"pages":{"value":412}"#))]}"#)
        #expect(saved.status == 200, "\(saved)")
        let indexed = try await HTTP.post(
            prod, #"{"query":{"recordType":"\#(t)","filterBy":[{"comparator":"EQUALS","fieldName":"title","fieldValue":{"value":"dune"}}]}}"#)
        #expect(indexed.status == 200 && indexed.records.count == 1, "\(indexed)")

        // Explain: the index used, candidates, in-memory sort.
        let explained = try await admin(
            "query/explain",
            body: #"{"query":{"recordType":"\#(t)","filterBy":[{"comparator":"EQUALS","fieldName":"title","fieldValue":{"value":"dune"}}],"sortBy":[{"fieldName":"title"}]}}"#,
            params: "&environment=production&database=private&user=alice")
        #expect(explained.status == 200, "\(explained)")
        let zone = try #require(explained.json["zones"]?.arrayValue?.first)
        #expect(zone["indexedFields"]?.arrayValue == [.string("title")], "\(explained)")
        #expect(zone["candidates"]?.numberValue?.int64 == 1)
        #expect(zone["sortedInMemory"]?.boolValue != nil)

        // Reset: a development-only addition goes away.
        let t2 = t + "X"
        _ = try await admin("schema/import", body: "DEFINE SCHEMA RECORD TYPE \(t2) (x STRING);")
        #expect(try await admin("schema/export", method: "GET").text.contains("RECORD TYPE \(t2)"))
        let reset = try await admin("schema/reset")
        #expect(reset.status == 200, "\(reset)")
        let after = try await admin("schema/export", method: "GET")
        #expect(!after.text.contains("RECORD TYPE \(t2)") && after.text.contains("RECORD TYPE \(t)"), "\(after.text)")
    }
}
