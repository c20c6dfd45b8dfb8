import CloudletWire
import Cloudlet
import Foundation
import Testing

@testable import CloudletServer

/// `records/modify` and `records/lookup` over HTTP: field encoding, the seven operation types, per-record results,
/// atomic zones, desiredKeys and numbersAsStrings.
@Suite(.liveServer) struct RecordsAPITests {
    @Test func everyFieldTypeRoundTripsWithItsTypeTag() async throws {
        let s = try live
        let name = unique("all")
        let asset = try await uploadAsset(s, Array(repeating: 7, count: 42), type: "Everything", field: "a")
        let listed = try await uploadAsset(s, [1], type: "Everything", field: "al")
        let fields = """
            "s":{"value":"héllo \\"q\\" \\u00e9","type":"STRING"},
            "i":{"value":9007199254740993,"type":"INT64"},
            "d":{"value":2.5,"type":"DOUBLE"},
            "b":{"value":"AAEC/w==","type":"BYTES"},
            "t":{"value":1700000000123,"type":"TIMESTAMP"},
            "l":{"value":{"latitude":47.5,"longitude":8.25,"altitude":400,"horizontalAccuracy":5,"timestamp":1700000000000},"type":"LOCATION"},
            "r":{"value":{"recordName":"target","action":"DELETE_SELF"},"type":"REFERENCE"},
            "a":{"value":\(asset.json),"type":"ASSETID"},
            "sl":{"value":["a","b"],"type":"STRING_LIST"},
            "il":{"value":[1,2,3],"type":"INT64_LIST"},
            "dl":{"value":[1.5,2],"type":"DOUBLE_LIST"},
            "tl":{"value":[1,2],"type":"TIMESTAMP_LIST"},
            "bl":{"value":["AA=="],"type":"BYTES_LIST"},
            "ll":{"value":[{"latitude":1,"longitude":2}],"type":"LOCATION_LIST"},
            "rl":{"value":[{"recordName":"x"}],"type":"REFERENCE_LIST"},
            "al":{"value":[\(listed.json)],"type":"ASSET_LIST"},
            "ui":{"value":7}, "ud":{"value":0.5}, "us":{"value":"x"}, "ul":{"value":["x","y"]},
            "ur":{"value":{"recordName":"y"}}, "uloc":{"value":{"latitude":3,"longitude":4}}
            """
        let saved = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp(name, type: "Everything", fields: fields))]}"#)
        #expect(saved.status == 200, "\(saved)")
        let record = try #require(saved.records.first)
        #expect(record["serverErrorCode"] == nil, "\(saved)")
        #expect(record["recordChangeTag"]?.stringValue?.isEmpty == false)
        #expect(record["created"]?["userRecordName"]?.stringValue == s.alice.user.userRecordName)
        #expect(record["modified"]?["deviceID"]?.stringValue == "cloudlet")
        #expect(record["created"]?["timestamp"]?.numberValue?.int64 ?? 0 > 1_700_000_000_000)
        #expect(record["deleted"] == .bool(false))
        #expect(record["zoneID"]?["zoneName"]?.stringValue == "_defaultZone")
        #expect(record["zoneID"]?["ownerRecordName"]?.stringValue == s.alice.user.userRecordName)

        let fetched = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"\#(name)"}]}"#)
        #expect(fetched.status == 200, "\(fetched)")
        let f = try #require(fetched.records.first?["fields"])
        func field(_ k: String) -> (JSONValue?, String?) { (f[k]?["value"], f[k]?["type"]?.stringValue) }
        #expect(field("s").0?.stringValue == "héllo \"q\" é" && field("s").1 == "STRING")
        #expect(field("i").0?.numberValue?.text == "9007199254740993" && field("i").1 == "INT64")
        #expect(field("d").0?.numberValue?.double == 2.5 && field("d").1 == "DOUBLE")
        #expect(field("b").0?.stringValue == "AAEC/w==" && field("b").1 == "BYTES")
        #expect(field("t").0?.numberValue?.int64 == 1_700_000_000_123 && field("t").1 == "TIMESTAMP")
        #expect(field("l").0?["latitude"]?.numberValue?.double == 47.5 && field("l").1 == "LOCATION")
        #expect(field("l").0?["altitude"]?.numberValue?.double == 400)
        #expect(field("l").0?["timestamp"]?.numberValue?.int64 == 1_700_000_000_000)
        #expect(field("r").0?["recordName"]?.stringValue == "target" && field("r").1 == "REFERENCE")
        #expect(field("r").0?["action"]?.stringValue == "DELETE_SELF")
        #expect(field("r").0?["zoneID"]?["zoneName"]?.stringValue == "_defaultZone")
        #expect(field("a").0?["fileChecksum"] == asset.singleFile["fileChecksum"] && field("a").1 == "ASSETID")
        #expect(field("a").0?["downloadURL"]?.stringValue?.hasSuffix("/${f}") == true)
        #expect(field("a").0?["size"]?.numberValue?.int64 == 42)
        #expect(field("sl").0 == .array([.string("a"), .string("b")]) && field("sl").1 == "STRING_LIST")
        #expect(field("il").0?.arrayValue?.compactMap { $0.numberValue?.int64 } == [1, 2, 3] && field("il").1 == "INT64_LIST")
        #expect(field("dl").0?.arrayValue?.map { $0.numberValue?.double } == [1.5, 2.0] && field("dl").1 == "DOUBLE_LIST")
        #expect(field("tl").1 == "TIMESTAMP_LIST" && field("bl").1 == "BYTES_LIST" && field("ll").1 == "LOCATION_LIST")
        #expect(field("rl").0?.arrayValue?.first?["action"]?.stringValue == "NONE" && field("rl").1 == "REFERENCE_LIST")
        #expect(field("al").1 == "ASSET_LIST")
        // Untyped values: the type is inferred from the JSON.
        #expect(field("ui").1 == "INT64" && field("ud").1 == "DOUBLE" && field("us").1 == "STRING")
        #expect(field("ul").1 == "STRING_LIST" && field("ur").1 == "REFERENCE" && field("uloc").1 == "LOCATION")
    }

    @Test func theSevenOperationTypes() async throws {
        let s = try live
        let n = unique("ops")
        let url = s.url("records/modify")
        func op(_ type: String, _ record: String) -> String { #"{"operations":[{"operationType":"\#(type)","record":{\#(record)}}]}"# }
        func first(_ r: Reply) -> JSONValue { r.records.first ?? .null }

        let created = first(try await HTTP.post(url, op("create", #""recordName":"\#(n)","recordType":"Note","fields":{"title":{"value":"a"},"count":{"value":1}}"#)))
        let tag1 = try #require(created["recordChangeTag"]?.stringValue)

        // create again: EXISTS, with the server's record.
        let exists = try await HTTP.post(url, op("create", #""recordName":"\#(n)","recordType":"Note""#))
        #expect(exists.status == 200)
        #expect(first(exists)["serverErrorCode"]?.stringValue == "EXISTS")
        #expect(first(exists)["serverRecord"]?["recordChangeTag"]?.stringValue == tag1)

        // update with a stale tag: CONFLICT, with the server's record.
        let conflict = first(try await HTTP.post(url, op("update", #""recordName":"\#(n)","recordType":"Note","recordChangeTag":"stale","fields":{"title":{"value":"x"}}"#)))
        #expect(conflict["serverErrorCode"]?.stringValue == "CONFLICT")
        #expect(conflict["recordName"]?.stringValue == n)
        #expect(conflict["serverRecord"]?["fields"]?["title"]?["value"]?.stringValue == "a")
        #expect(conflict["uuid"]?.stringValue?.count == 36)

        // update (no recordType, as in Apple's example): merges fields.
        let updated = first(try await HTTP.post(url, op("update", #""recordName":"\#(n)","recordChangeTag":"\#(tag1)","fields":{"count":{"value":2}}"#)))
        #expect(updated["fields"]?["title"]?["value"]?.stringValue == "a", "\(updated)")
        #expect(updated["fields"]?["count"]?["value"]?.numberValue?.int64 == 2)
        let tag2 = try #require(updated["recordChangeTag"]?.stringValue)
        #expect(tag2 != tag1)

        // replace: fields not given are removed.
        let replaced = first(try await HTTP.post(url, op("replace", #""recordName":"\#(n)","recordType":"Note","recordChangeTag":"\#(tag2)","fields":{"title":{"value":"b"}}"#)))
        #expect(replaced["fields"]?["count"] == nil && replaced["fields"]?["title"]?["value"]?.stringValue == "b", "\(replaced)")

        // forceUpdate: no tag needed, merges; creates a missing record.
        let forced = first(try await HTTP.post(url, op("forceUpdate", #""recordName":"\#(n)","fields":{"count":{"value":3}}"#)))
        #expect(forced["fields"]?["title"]?["value"]?.stringValue == "b" && forced["fields"]?["count"] != nil, "\(forced)")
        let fresh = first(try await HTTP.post(url, op("forceUpdate", #""recordName":"\#(n)-new","recordType":"Note","fields":{"title":{"value":"n"}}"#)))
        #expect(fresh["recordChangeTag"] != nil, "\(fresh)")

        // forceReplace: the whole record, no tag.
        let forceReplaced = first(try await HTTP.post(url, op("forceReplace", #""recordName":"\#(n)","recordType":"Note","fields":{"other":{"value":"o"}}"#)))
        #expect(forceReplaced["fields"]?["title"] == nil && forceReplaced["fields"]?["other"] != nil, "\(forceReplaced)")
        let tag3 = try #require(forceReplaced["recordChangeTag"]?.stringValue)

        // delete needs the current tag.
        let staleDelete = first(try await HTTP.post(url, op("delete", #""recordName":"\#(n)","recordChangeTag":"\#(tag1)""#)))
        #expect(staleDelete["serverErrorCode"]?.stringValue == "CONFLICT")
        let deleted = first(try await HTTP.post(url, op("delete", #""recordName":"\#(n)","recordChangeTag":"\#(tag3)""#)))
        #expect(deleted["deleted"] == .bool(true) && deleted["recordName"]?.stringValue == n, "\(deleted)")

        // forceDelete: any tag; a missing record is NOT_FOUND.
        let forceDeleted = first(try await HTTP.post(url, op("forceDelete", #""recordName":"\#(n)-new""#)))
        #expect(forceDeleted["deleted"] == .bool(true))
        let missing = first(try await HTTP.post(url, op("forceDelete", #""recordName":"\#(n)-new""#)))
        #expect(missing["serverErrorCode"]?.stringValue == "NOT_FOUND")

        let gone = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"\#(n)"},{"recordName":"\#(n)-new"}]}"#)
        #expect(gone.records.map { $0["serverErrorCode"]?.stringValue } == ["NOT_FOUND", "NOT_FOUND"])
    }

    @Test func resultsComeInRequestOrderAndTheDefaultZoneIsNotAtomic() async throws {
        let s = try live
        let a = unique("order-a"), b = unique("order-b")
        let r = try await HTTP.post(
            s.url("records/modify"),
            #"{"operations":[\#(createOp(a)),{"operationType":"forceDelete","record":{"recordName":"\#(unique("missing"))"}},\#(createOp(b))]}"#)
        #expect(r.status == 200)
        #expect(r.records.map { $0["recordName"]?.stringValue } == [a, r.records[1]["recordName"]?.stringValue, b])
        #expect(r.records.map { $0["serverErrorCode"]?.stringValue } == [nil, "NOT_FOUND", nil])
    }

    @Test func anAtomicBatchInACustomZoneIsAllOrNothing() async throws {
        let s = try live
        let zone = unique("Atomic")
        let made = try await HTTP.post(s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(zone)"}}}]}"#)
        #expect(made.zones.first?["atomic"] == .bool(true), "\(made)")
        let c1 = unique("c1"), c2 = unique("c2")
        let batch = #"[\#(createOp(c1)),\#(createOp(c2)),{"operationType":"forceDelete","record":{"recordName":"nope"}}]"#
        let failed = try await HTTP.post(s.url("records/modify"), #"{"zoneID":{"zoneName":"\#(zone)"},"operations":\#(batch)}"#)
        #expect(failed.records.map { $0["serverErrorCode"]?.stringValue } == ["ATOMIC_ERROR", "ATOMIC_ERROR", "NOT_FOUND"], "\(failed)")
        let lookup = #"{"zoneID":{"zoneName":"\#(zone)"},"records":[{"recordName":"\#(c1)"},{"recordName":"\#(c2)"}]}"#
        #expect(try await HTTP.post(s.url("records/lookup"), lookup).records.allSatisfy { $0["serverErrorCode"]?.stringValue == "NOT_FOUND" })

        let partial = try await HTTP.post(s.url("records/modify"), #"{"atomic":false,"zoneID":{"zoneName":"\#(zone)"},"operations":\#(batch)}"#)
        #expect(partial.records.map { $0["serverErrorCode"]?.stringValue } == [nil, nil, "NOT_FOUND"], "\(partial)")
        #expect(partial.records[0]["zoneID"]?["zoneName"]?.stringValue == zone)
        #expect(try await HTTP.post(s.url("records/lookup"), lookup).records.allSatisfy { $0["serverErrorCode"] == nil })
    }

    @Test func desiredKeysAndNumbersAsStrings() async throws {
        let s = try live
        let n = unique("keys")
        let fields = #""title":{"value":"t"},"count":{"value":42},"ratio":{"value":2.5},"when":{"value":5,"type":"TIMESTAMP"}"#
        let saved = try await HTTP.post(s.url("records/modify"), #"{"desiredKeys":["title"],"operations":[\#(createOp(n, fields: fields))]}"#)
        #expect(saved.records.first?["fields"]?.objectValue?.keys.sorted() == ["title"], "\(saved)")

        let opKeys = try await HTTP.post(
            s.url("records/modify"),
            #"{"desiredKeys":["title"],"operations":[{"operationType":"forceUpdate","desiredKeys":["count"],"record":{"recordName":"\#(n)","fields":{}}}]}"#)
        #expect(opKeys.records.first?["fields"]?.objectValue?.keys.sorted() == ["count"], "\(opKeys)")

        let none = try await HTTP.post(s.url("records/lookup"), #"{"desiredKeys":[],"records":[{"recordName":"\#(n)"}]}"#)
        #expect(none.records.first?["fields"] == .object([:]))
        #expect(none.records.first?["recordType"]?.stringValue == "Note")

        let perRecord = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"\#(n)","desiredKeys":["ratio","when"]}]}"#)
        #expect(perRecord.records.first?["fields"]?.objectValue?.keys.sorted() == ["ratio", "when"])

        let strings = try await HTTP.post(s.url("records/lookup"), #"{"numbersAsStrings":true,"records":[{"recordName":"\#(n)"}]}"#)
        let f = strings.records.first?["fields"]
        #expect(f?["count"]?["value"] == .string("42"), "\(strings)")
        #expect(f?["ratio"]?["value"] == .string("2.5"))
        #expect(f?["count"]?["type"]?.stringValue == "INT64")
        #expect(f?["when"]?["value"]?.numberValue?.int64 == 5)  // timestamps stay numbers
        // And a client may send numbers back as strings.
        let back = try await HTTP.post(
            s.url("records/modify"),
            #"{"operations":[{"operationType":"forceUpdate","record":{"recordName":"\#(n)","fields":{"count":{"value":"43","type":"INT64"}}}}]}"#)
        #expect(back.records.first?["fields"]?["count"]?["value"]?.numberValue?.int64 == 43, "\(back)")
    }

    @Test func createWithoutARecordNameGetsAUUID() async throws {
        let s = try live
        let r = try await HTTP.post(s.url("records/modify"), #"{"operations":[{"operationType":"create","record":{"recordType":"Note"}}]}"#)
        let name = try #require(r.records.first?["recordName"]?.stringValue, "\(r)")
        #expect(UUID(uuidString: name) != nil)
    }

    @Test func referencesCascadeAndValidate() async throws {
        let s = try live
        let parent = unique("parent"), child = unique("child")
        let ops = """
            {"operations":[\(createOp(parent)),\(createOp(child, fields: #""parent":{"value":{"recordName":"\#(parent)","action":"DELETE_SELF"},"type":"REFERENCE"}"#))]}
            """
        #expect(try await HTTP.post(s.url("records/modify"), ops).records.allSatisfy { $0["serverErrorCode"] == nil })
        _ = try await HTTP.post(s.url("records/modify"), #"{"operations":[{"operationType":"forceDelete","record":{"recordName":"\#(parent)"}}]}"#)
        let gone = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"\#(child)"}]}"#)
        #expect(gone.records.first?["serverErrorCode"]?.stringValue == "NOT_FOUND")

        let dangling = try await HTTP.post(
            s.url("records/modify"),
            #"{"operations":[\#(createOp(unique("v"), fields: #""to":{"value":{"recordName":"nobody","action":"VALIDATE"}}"#))]}"#)
        #expect(dangling.records.first?["serverErrorCode"]?.stringValue == "VALIDATING_REFERENCE_ERROR", "\(dangling)")
    }

    @Test func untypedValuesFollowTheSchemaAndTypeChangesFailPerRecord() async throws {
        let s = try live
        let type = "Measure" + UUID().uuidString.prefix(6).filter(\.isLetter)
        let first = unique("m1"), second = unique("m2")
        _ = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp(first, type: type, fields: #""v":{"value":1.5}"#))]}"#)
        // `5` alone would be an INT64; the schema says DOUBLE.
        let inferred = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp(second, type: type, fields: #""v":{"value":5}"#))]}"#)
        #expect(inferred.records.first?["fields"]?["v"]?["type"]?.stringValue == "DOUBLE", "\(inferred)")
        // An explicit, different type: the engine refuses that record, naming the field.
        let wrong = try await HTTP.post(
            s.url("records/modify"),
            #"{"operations":[\#(createOp(unique("m3"), type: type, fields: #""v":{"value":"x","type":"STRING"}"#)),\#(createOp(unique("m4"), type: type, fields: #""v":{"value":2.0}"#))]}"#)
        #expect(wrong.status == 200)
        #expect(wrong.records[0]["serverErrorCode"]?.stringValue == "BAD_REQUEST")
        #expect(wrong.records[0]["reason"]?.stringValue?.contains("'v'") == true, "\(wrong)")
        #expect(wrong.records[1]["serverErrorCode"] == nil)
    }

    @Test func aRecordOverOneMegabyteIsRefusedAndNotStored() async throws {
        let s = try live
        let n = unique("big")
        let big = String(repeating: "x", count: 1_000_100)
        let r = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp(n, fields: #""body":{"value":"\#(big)"}"#))]}"#)
        #expect(r.status == 200)
        #expect(r.records.first?["serverErrorCode"]?.stringValue == "BAD_REQUEST", "\(r)")
        #expect(r.records.first?["reason"]?.stringValue?.contains("limit is 1000000 bytes") == true)
        let lookup = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"\#(n)"}]}"#)
        #expect(lookup.records.first?["serverErrorCode"]?.stringValue == "NOT_FOUND")
    }
}
