import CloudletCore
import Testing

@Suite("FieldType")
struct FieldTypeTests {
    static let allTypes: [FieldType] = ScalarType.allCases.flatMap { [FieldType($0), FieldType($0, list: true)] }

    @Test("CloudKit names round-trip", arguments: allTypes)
    func cloudKitNameRoundTrip(_ type: FieldType) {
        #expect(FieldType(cloudKitName: type.description) == type)
    }

    @Test(
        "CloudKit names",
        arguments: [
            ("STRING", FieldType(.string)), ("INT64", FieldType(.int64)), ("DOUBLE", FieldType(.double)),
            ("BYTES", FieldType(.bytes)), ("TIMESTAMP", FieldType(.timestamp)), ("LOCATION", FieldType(.location)),
            ("REFERENCE", FieldType(.reference)), ("ASSETID", FieldType(.asset)),
            ("STRING_LIST", FieldType(.string, list: true)), ("REFERENCE_LIST", FieldType(.reference, list: true)),
            ("ASSETID_LIST", FieldType(.asset, list: true)),
        ])
    func names(_ name: String, _ type: FieldType) {
        #expect(type.description == name)
        #expect(FieldType(cloudKitName: name) == type)
    }

    @Test("ASSET is accepted as ASSETID")
    func assetAlias() {
        #expect(FieldType(cloudKitName: "ASSET") == FieldType(.asset))
        #expect(FieldType(cloudKitName: "ASSET_LIST") == FieldType(.asset, list: true))
        #expect(FieldType(.asset).description == "ASSETID", "we always write the canonical name")
    }

    @Test(
        "unknown names are rejected",
        arguments: ["", "_LIST", "STRING_LIST_LIST", "string", "LIST", "INT32", "ASSETS", " STRING"])
    func unknownNames(_ name: String) {
        #expect(FieldType(cloudKitName: name) == nil)
    }

    @Test("type tags round-trip and are distinct", arguments: allTypes)
    func tags(_ type: FieldType) {
        #expect(FieldType(tag: type.tag) == type)
        #expect(Self.allTypes.filter { $0.tag == type.tag }.count == 1)
        #expect((type.tag & 0x80 != 0) == type.isList)
    }

    /// The tags are on disk: changing one breaks every existing file.
    @Test("scalar tags are fixed")
    func fixedTags() {
        #expect(ScalarType.allCases.map(\.rawValue) == [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(ScalarType.allCases.map(\.cloudKitName) == [
            "STRING", "INT64", "DOUBLE", "BYTES", "TIMESTAMP", "LOCATION", "REFERENCE", "ASSETID",
        ])
        #expect(FieldType(.string, list: true).tag == 0x81)
        #expect(Reference.Action.allCases.map(\.rawValue) == [0, 1, 2])
        #expect(Reference.Action.allCases.map(\.cloudKitName) == ["NONE", "DELETE_SELF", "VALIDATE"])
    }

    @Test("tags that name no type are rejected", arguments: [0, 9, 0x7F, 0x80, 0x89, 0xFF] as [UInt8])
    func unknownTags(_ tag: UInt8) {
        #expect(FieldType(tag: tag) == nil)
    }

    @Test("every value reports its type", arguments: ScalarType.allCases)
    func valueTypes(_ scalar: ScalarType) {
        for value in Samples.values(of: scalar) {
            #expect(value.type == FieldType(scalar))
        }
        #expect(FieldValue.list(scalar, []).type == FieldType(scalar, list: true))
    }

    @Test("validate rejects lists with items of another type or nested lists")
    func validate() throws {
        try FieldValue.list(.int64, [1, 2]).validate(field: "ok")
        try FieldValue.string("scalar").validate(field: "ok")
        let mixed = #expect(throws: CloudletError.self) { try FieldValue.list(.int64, [1, "two"]).validate(field: "nums") }
        #expect(mixed?.code == .invalidArguments)
        #expect(mixed?.message.contains("nums") == true)
        let nested = #expect(throws: CloudletError.self) {
            try FieldValue.list(.int64, [.list(.int64, [1])]).validate(field: "deep")
        }
        #expect(nested?.code == .invalidArguments)
    }
}
