import CloudletCore
import CloudletWire
import Testing

/// The wire module is the one place where Cloudlet's values meet CloudKit JSON: every field kind and every error
/// code must survive encode → decode, so a kind or code added without its coding fails here.
@Suite struct WireRoundTripTests {
    static let zone = ZoneID(zoneName: "Z", ownerName: "alice")

    /// One value of each scalar type, with every optional member of the composite ones set.
    static func sample(_ t: ScalarType) -> FieldValue {
        switch t {
        case .string: .string("héllo \"wire\"\n")
        case .int64: .int64(.min)
        case .double: .double(-0.1)
        case .bytes: .bytes([0, 1, 2, 254, 255])
        case .timestamp: .timestamp(1_700_000_000_123)
        case .location:
            .location(
                Location(
                    latitude: 48.85, longitude: 2.35, horizontalAccuracy: 5, verticalAccuracy: 3, altitude: 35, speed: 1.5,
                    course: 270, timestamp: 1_700_000_000_000))
        case .reference: .reference(Reference(recordName: "target", action: .deleteSelf))
        case .asset: .asset(AssetReference(fileChecksum: "abc", size: 42, receipt: "r"))
        }
    }

    static func roundTrip(_ v: FieldValue, numbersAsStrings: Bool = false) throws -> FieldValue {
        var w = JSONWriter()
        FieldCoding.write(v, to: &w, numbersAsStrings: numbersAsStrings, zone: zone)
        let json = try JSONParser.parse(w.bytes)
        return try FieldCoding.decode(json, at: "f", schemaType: nil, zone: zone)
    }

    @Test(arguments: ScalarType.allCases) func everyFieldKindSurvivesTheWire(_ t: ScalarType) throws {
        let scalar = Self.sample(t)
        #expect(try Self.roundTrip(scalar) == scalar, "\(t)")
        let list = FieldValue.list(t, [scalar, scalar])
        #expect(try Self.roundTrip(list) == list, "\(t) list")
        if t == .int64 || t == .double {
            #expect(try Self.roundTrip(scalar, numbersAsStrings: true) == scalar, "\(t) as a string")
        }
    }

    @Test func everyErrorCodeHasAServerCodeAStatusAndComesBack() throws {
        #expect(CloudletError.Code.allCases.count >= 23)
        for code in CloudletError.Code.allCases {
            let server = code.serverErrorCode
            #expect(ErrorTable.statuses[server] != nil, "\(code) → \(server) has no HTTP status")
            // The code a bare serverErrorCode stands for maps back to the same serverErrorCode.
            #expect(ErrorTable.code(serverErrorCode: server).serverErrorCode == server, "\(code)")

            var w = JSONWriter()
            w.object { w in APIError(CloudletError(code, "why")).writeMembers(to: &w) }
            let json = try #require(try JSONParser.parse(w.bytes).objectValue)
            let back = try #require(APIError(json: json))
            #expect(back.serverErrorCode == server && back.reason == "why")
            #expect(back.status == code.httpStatus)
            #expect(back.cloudletError.code == code, "\(code) came back as \(back.cloudletError.code)")
            #expect(CloudletError.Code(name: code.description) == code)
        }
    }

    @Test func errorsFromACloudKitServerMapByTheirServerCode() throws {
        let json = try #require(try JSONParser.parse(Array(#"{"serverErrorCode":"ZONE_NOT_FOUND","reason":"gone"}"#.utf8)).objectValue)
        let e = try #require(APIError(json: json))
        #expect(e.cloudletError.code == .zoneNotFound && e.status == 404)
    }
}
