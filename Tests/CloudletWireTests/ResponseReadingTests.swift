import CloudletCore
import CloudletModel
import CloudletWire
import Testing

/// The client reads `records/lookup`, `records/modify` and `records/query` answers straight from their bytes
/// (`ClientCoding.recordResults` / `queryResults`, no `JSONValue` tree). Whatever the server writes, the result
/// must be the one the tree decoding gives: the same records, the same per-record errors, the same refusals.
@Suite struct ResponseReadingTests {
    static let zone = ZoneID(zoneName: "Z", ownerName: "alice")

    /// A record with every field kind (scalar and list), stamps, a tag and a parent.
    static func richRecord(_ name: String) -> Record {
        var r = Record(recordType: "Item", recordName: name, zoneID: zone)
        for t in ScalarType.allCases {
            r.fields["s_\(t)"] = WireRoundTripTests.sample(t)
            r.fields["l_\(t)"] = .list(t, [WireRoundTripTests.sample(t), WireRoundTripTests.sample(t)])
        }
        r.changeTag = "tag-\(name)"
        r.created = RecordStamp(timestamp: 1_700_000_000_000, userRecordName: "_alice", deviceID: "dev")
        r.modified = RecordStamp(timestamp: 1_700_000_000_500, userRecordName: "_bob", deviceID: "dev2")
        r.parent = RecordID(recordName: "p-\(name)", zoneID: zone)
        return r
    }

    static func response(_ items: [(inout JSONWriter) -> Void], extra: (inout JSONWriter) -> Void = { _ in }) -> [UInt8] {
        var w = JSONWriter()
        w.object { w in
            w.key("records")
            w.array { w in for item in items { item(&w) } }
            extra(&w)
        }
        return w.bytes
    }

    /// What the tree decoding (the path every other response takes) makes of the same bytes.
    static func viaTree(_ body: [UInt8], ids: [RecordID]) throws -> [RecordResult] {
        let o = try #require(try JSONParser.parse(body).objectValue)
        return try ClientCoding.items(o, key: "records", count: ids.count).enumerated().map { i, item in
            try ClientCoding.recordResult(item, at: "records[\(i)]", for: ids[i])
        }
    }

    /// The same results: equal records, the same deletions, errors with the same code, message and server record.
    static func same(_ a: [RecordResult], _ b: [RecordResult]) -> Bool {
        a.count == b.count
            && zip(a, b).allSatisfy { x, y in
                switch (x, y) {
                case (.saved(let r), .saved(let s)): r == s
                case (.deleted(let i), .deleted(let j)): i == j
                case (.failed(let i, let e), .failed(let j, let f)):
                    i == j && e.code == f.code && e.message == f.message && e.serverRecord == f.serverRecord
                default: false
                }
            }
    }

    @Test func plainRecordsErrorsAndDeletionsComeOutAsTheTreeDecodesThem() throws {
        let a = Self.richRecord("a"), b = Self.richRecord("b")
        var conflict = CloudletError(.serverRecordChanged, "changed meanwhile")
        conflict.serverRecord = Self.richRecord("c")
        let missing = RecordID(recordName: "gone", zoneID: Self.zone)
        let body = Self.response([
            { RecordCoding.write(a, to: &$0, desiredKeys: nil, numbersAsStrings: false) },
            { RecordCoding.writeError(conflict, recordName: "c", to: &$0, numbersAsStrings: false) },
            { RecordCoding.writeDeleted(missing, to: &$0) },
            { RecordCoding.write(b, to: &$0, desiredKeys: nil, numbersAsStrings: true) },
        ])
        let ids = [a.id, RecordID(recordName: "c", zoneID: Self.zone), missing, b.id]
        let read = try ClientCoding.recordResults(body, for: ids)
        #expect(Self.same(read, try Self.viaTree(body, ids: ids)))
        guard read.count == 4, case .saved(let ra) = read[0], case .failed(_, let e) = read[1], case .deleted = read[2],
            case .saved(let rb) = read[3]
        else {
            Issue.record("unexpected results \(read)")
            return
        }
        #expect(ra == a && rb == b)
        #expect(e.code == .serverRecordChanged && e.serverRecord == Self.richRecord("c"))
    }

    @Test func unusualButValidShapesFallBackToTheTreeAndAgreeWithIt() throws {
        // Members in another order, the older `changeTag`, `ownerName`, a null parent, unknown members, escapes.
        let documents = [
            #"{"records":[{"zoneID":{"ownerName":"alice","zoneName":"Z"},"fields":{"n":{"type":"INT64","value":"7"}},"recordType":"T","recordName":"x","changeTag":"t1"}]}"#,
            #"{"records":[{"recordName":"x","recordType":"T","fields":{},"parent":null,"extra":[1,{"y":2}]}]}"#,
            #"{"records":[{"recordName":"\u0078","recordType":"T","fields":{"s":{"value":"a\nb","type":"STRING","note":1}},"deleted":false}]}"#,
            #"{"records":[{"recordName":"x","recordType":"T","created":{"timestamp":5}}]}"#,
        ]
        let ids = [RecordID(recordName: "x", zoneID: Self.zone)]
        for d in documents {
            let body = Array(d.utf8)
            #expect(Self.same(try ClientCoding.recordResults(body, for: ids), try Self.viaTree(body, ids: ids)), "\(d)")
        }
    }

    @Test func malformedResponsesAreRefusedNotHalfRead() throws {
        let ids = [RecordID(recordName: "x", zoneID: Self.zone)]
        let bad = [
            #"{"records":[{"recordName":"x","recordType":"T"}]"#,  // truncated
            #"{"records":[{"recordName":"x","recordType":"T","recordName":"y"}]}"#,  // duplicate key
            #"{"records":[{"recordName":5,"recordType":"T"}]}"#,  // wrong kind
            #"{"records":[{"recordName":"x","recordType":"T","fields":{"n":{"value":"q","type":"INT64"}}}]}"#,  // bad value
            #"{"records":[]}"#,  // one result missing
            #"{"records":[{"recordName":"x","recordType":"T"},{"recordName":"y","recordType":"T"}]}"#,  // one too many
            #"{"records":[{"recordName":"x","recordType":"T"}]} x"#,  // trailing data
            #"[]"#,
        ]
        for d in bad {
            #expect(throws: (any Error).self, "\(d)") { try ClientCoding.recordResults(Array(d.utf8), for: ids) }
        }
    }

    /// Fields are decoded as they are read, before the record's `zoneID` (written after them) is known; a record
    /// of another zone than the one the caller expected (a zone-wide query) has them read again in its own zone.
    @Test func aRecordOfAnotherZoneHasItsReferencesCheckedAgainstItsOwnZone() throws {
        let other = ZoneID(zoneName: "Other", ownerName: "alice")
        var r = Record(recordType: "Item", recordName: "x", zoneID: other)
        r.fields["ref"] = .reference(Reference(recordName: "y", action: .deleteSelf))
        r.fields["n"] = .int64(3)
        let body = Self.response([{ RecordCoding.write(r, to: &$0, desiredKeys: nil, numbersAsStrings: false) }])
        let (read, _) = try ClientCoding.queryResults(body, zone: Self.zone)
        #expect(read == [r])
        let id = [RecordID(recordName: "x", zoneID: Self.zone)]
        #expect(Self.same(try ClientCoding.recordResults(body, for: id), try Self.viaTree(body, ids: id)))

        // A reference into a third zone is refused whichever zone was expected.
        let stray = #"{"records":[{"recordName":"x","recordType":"T","fields":{"ref":{"type":"REFERENCE","value":{"recordName":"y","action":"NONE","zoneID":{"zoneName":"Third"}}}},"zoneID":{"zoneName":"Other"}}]}"#
        #expect(throws: APIError.self) { try ClientCoding.queryResults(Array(stray.utf8), zone: Self.zone) }
        #expect(throws: APIError.self) { try ClientCoding.queryResults(Array(stray.utf8), zone: other) }
    }

    /// Requests name a zone the short way: no `zoneType`, and the owner only when it is not the caller's own.
    @Test func requestsNameTheCallersOwnZonesWithoutAnOwner() {
        var w = JSONWriter()
        ZoneIDCoding.writeRequest(ZoneID(zoneName: "Z"), to: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"zoneName":"Z"}"#)
        w = JSONWriter()
        ZoneIDCoding.writeRequest(Self.zone, to: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"zoneName":"Z","ownerRecordName":"alice"}"#)
    }

    @Test func aQueryAnswerGivesItsRecordsAndMarker() throws {
        let records = (0..<3).map { Self.richRecord("q\($0)") }
        let body = Self.response(
            records.map { r in { RecordCoding.write(r, to: &$0, desiredKeys: nil, numbersAsStrings: false) } },
            extra: { $0.member("continuationMarker", "next-page") })
        let (read, marker) = try ClientCoding.queryResults(body, zone: Self.zone)
        #expect(read == records)
        #expect(marker == "next-page")
        let last = try ClientCoding.queryResults(Array(#"{"records":[],"continuationMarker":null}"#.utf8), zone: Self.zone)
        #expect(last.records.isEmpty && last.continuationMarker == nil)
    }

    @Test func theStreamingReaderWalksMembersAndCanGoBack() throws {
        let doc = Array(#" {"a": [1, "two", {"x": null}], "b": "s\u00e9"} "#.utf8)
        var seen: [String] = []
        try JSONParser.read(doc) { p in
            try p.readObject { p, key in
                seen.append(key)
                if key == "a" {
                    let m = p.mark
                    let whole = try p.readValue()
                    p.reset(to: m)
                    var items: [JSONValue] = []
                    try p.readArray { p, i in
                        #expect(i == items.count)
                        items.append(try p.readValue())
                    }
                    #expect(.array(items) == whole)
                } else {
                    #expect(try p.readString() == "sé")
                }
            }
        }
        #expect(seen == ["a", "b"])
        #expect(throws: JSONParser.Error.self) { try JSONParser.read(Array(#"{"a":1} {"#.utf8)) { p in try p.readObject { p, _ in _ = try p.readValue() } } }
        #expect(throws: JSONParser.Error.self) { try JSONParser.read(Array(#"{"a":1"#.utf8)) { p in try p.readObject { p, _ in _ = try p.readValue() } } }
    }
}
