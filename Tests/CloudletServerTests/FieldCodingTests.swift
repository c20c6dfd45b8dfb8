import CloudletWire
import Cloudlet
import Testing

@testable import CloudletServer

/// Field values from and to Web Services JSON, without a server.
@Suite struct FieldCodingTests {
    let zone = ZoneID(zoneName: "Z")

    func decode(_ json: String, schema: FieldType? = nil) throws -> FieldValue {
        try FieldCoding.decode(try JSONParser.parse(Array(json.utf8)), at: "f", schemaType: schema, zone: zone)
    }

    func encode(_ v: FieldValue, numbersAsStrings: Bool = false) throws -> JSONValue {
        var w = JSONWriter()
        FieldCoding.write(v, to: &w, numbersAsStrings: numbersAsStrings, zone: zone)
        return try JSONParser.parse(w.bytes)
    }

    @Test(arguments: [
        (#"{"value":"x"}"#, FieldValue.string("x")),
        (#"{"value":5}"#, .int64(5)),
        (#"{"value":"5","type":"INT64"}"#, .int64(5)),
        (#"{"value":true,"type":"INT64"}"#, .int64(1)),
        (#"{"value":5,"type":"DOUBLE"}"#, .double(5)),
        (#"{"value":0.25}"#, .double(0.25)),
        (#"{"value":"AAE=","type":"BYTES"}"#, .bytes([0, 1])),
        (#"{"value":1.6,"type":"TIMESTAMP"}"#, .timestamp(2)),
        (#"{"value":{"latitude":1,"longitude":2,"speed":3}}"#, .location(Location(latitude: 1, longitude: 2, speed: 3))),
        (#"{"value":{"recordName":"r","action":"VALIDATE","zoneID":{"zoneName":"Z"}}}"#, .reference(Reference(recordName: "r", action: .validate))),
        (#"{"value":{"fileChecksum":"c","size":3},"type":"ASSET"}"#, .asset(AssetReference(fileChecksum: "c", size: 3))),
        (#"{"value":[1,2.5]}"#, .list(.double, [.double(1), .double(2.5)])),
        (#"{"value":[],"type":"STRING_LIST"}"#, .list(.string, [])),
        (#"{"value":["a"],"type":"LIST"}"#, .list(.string, [.string("a")])),
    ])
    func decodes(_ json: String, _ expected: FieldValue) throws {
        #expect(try decode(json) == expected)
    }

    @Test func theSchemaTypeDecidesWhenTheRequestGivesNone() throws {
        #expect(try decode(#"{"value":5}"#, schema: FieldType(.double)) == .double(5))
        #expect(try decode(#"{"value":5}"#, schema: FieldType(.timestamp)) == .timestamp(5))
        #expect(try decode(#"{"value":[]}"#, schema: FieldType(.int64, list: true)) == .list(.int64, []))
        // An explicit tag wins over the schema (the engine then reports the mismatch for that record).
        #expect(try decode(#"{"value":"x","type":"STRING"}"#, schema: FieldType(.double)) == .string("x"))
    }

    @Test(arguments: [
        (#"{"value":"x","type":"DOUBLE"}"#, "f.value is a string, which is not a valid DOUBLE"),
        (#"{"value":1.5,"type":"INT64"}"#, "not a valid INT64 (expected an integer)"),
        (#"{"value":99999999999999999999,"type":"INT64"}"#, "outside the INT64 range"),
        (#"{"value":[1,"a"],"type":"INT64_LIST"}"#, "f.value[1] is a string"),
        (#"{"value":1,"type":"STRING_LIST"}"#, "must be an array for type STRING_LIST"),
        (#"{"value":1e999,"type":"DOUBLE"}"#, "f.value 1e999 is outside the DOUBLE range"),
        (#"{"value":{"latitude":1,"longitude":2,"altitude":-1e400}}"#, "f.value.altitude must be a finite number"),
        (#"{"value":{"latitude":91,"longitude":0}}"#, "outside ±90 / ±180"),
        (#"{"value":{"recordName":"r","action":"CASCADE"}}"#, "action 'CASCADE' is not NONE, DELETE_SELF or VALIDATE"),
        (#"{"value":{"fileChecksum":"c"},"type":"ASSETID"}"#, "f.value.size is missing"),
        (#"{"value":[]}"#, "empty list without a type"),
        (#"{"value":[[1]]}"#, "a list cannot contain a list"),
        (#"{"value":{"x":1}}"#, "cannot tell the type of an object"),
        (#"{"type":"STRING"}"#, "f.value is missing"),
        (#""x""#, "f must be a JSON object"),
        (#"{"value":"x","type":7}"#, "f.type must be a string"),
    ])
    func rejectsWithTheFieldNamed(_ json: String, _ message: String) {
        do {
            let v = try decode(json)
            Issue.record("decoded \(json) as \(v)")
        } catch let e as APIError {
            #expect(e.serverErrorCode == "BAD_REQUEST" && e.reason.contains(message), "\(json): \(e.reason)")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test func encodesValuesWithTypeTags() throws {
        #expect(try encode(.int64(7)) == .object(["value": .number(JSONNumber(text: "7", isInteger: true)), "type": .string("INT64")]))
        #expect(try encode(.int64(7), numbersAsStrings: true)["value"] == .string("7"))
        #expect(try encode(.double(1.5), numbersAsStrings: true)["value"] == .string("1.5"))
        #expect(try encode(.bytes([0, 1, 255]))["value"] == .string("AAH/"))
        #expect(try encode(.list(.asset, []))["type"] == .string("ASSET_LIST"))
        #expect(try encode(.asset(AssetReference(fileChecksum: "c", size: 1)))["type"] == .string("ASSETID"))
        let ref = try encode(.reference(Reference(recordName: "r", action: .deleteSelf)))["value"]
        #expect(ref?["action"] == .string("DELETE_SELF") && ref?["zoneID"]?["zoneName"] == .string("Z"))
        let loc = try encode(.location(Location(latitude: 1, longitude: 2, timestamp: 3)))["value"]
        #expect(loc?["timestamp"]?.numberValue?.int64 == 3 && loc?["altitude"] == nil)
    }

    @Test func everyValueSurvivesEncodeThenDecode() throws {
        let values: [FieldValue] = [
            .string("s"), .int64(-3), .double(2.25), .bytes([1, 2]), .timestamp(17), .location(Location(latitude: -1, longitude: 179.5, altitude: 3)),
            .reference(Reference(recordName: "r", action: .validate)), .asset(AssetReference(fileChecksum: "x", size: 9, receipt: "q")),
            .list(.timestamp, [.timestamp(1)]), .list(.bytes, [.bytes([9])]), .list(.reference, [.reference(Reference(recordName: "a"))]),
        ]
        for v in values {
            var w = JSONWriter()
            FieldCoding.write(v, to: &w, numbersAsStrings: false, zone: zone)
            #expect(try FieldCoding.decode(try JSONParser.parse(w.bytes), at: "f", schemaType: nil, zone: zone) == v)
        }
    }
}
