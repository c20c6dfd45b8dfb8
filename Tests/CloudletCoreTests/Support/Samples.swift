import CloudletCore
import CloudletTestSupport

/// Hand-picked edge-case values of every scalar type, and records built from them.
enum Samples {
    static let strings: [FieldValue] = [
        .string(""), .string("a"), .string("hello, world"),
        // Multi-byte scalars, a ZWJ sequence, a combining mark.
        .string("héllo wörld · 日本語 · 🚀 · 👩‍👩‍👧‍👦 · e\u{301}"),
        .string("\u{0}embedded NUL\u{0}"), .string(String(repeating: "x", count: 300)),  // 300: two-byte length prefix
    ]

    static let int64s: [FieldValue] = [
        .int64(0), .int64(1), .int64(-1), .int64(63), .int64(64), .int64(-64), .int64(-65),
        .int64(Int64(Int32.max)), .int64(Int64(Int32.min)), .int64(.max), .int64(.min), .int64(.max - 1), .int64(.min + 1),
    ]

    static let doubles: [FieldValue] = [
        .double(0), .double(-0.0), .double(1.5), .double(-273.15), .double(.pi),
        .double(.infinity), .double(-.infinity), .double(.nan), .double(-.nan),
        .double(Double(bitPattern: 0x7FF8_0000_DEAD_BEEF)),  // a NaN with a payload
        .double(.leastNonzeroMagnitude), .double(.leastNormalMagnitude), .double(.greatestFiniteMagnitude),
        .double(-.greatestFiniteMagnitude), .double(.ulpOfOne),
    ]

    /// 1 MiB of deterministic, non-repeating-looking bytes.
    static let largeBytes: [UInt8] = {
        var g = SeededRandom(seed: 42)
        return (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &g) }
    }()

    static let bytes: [FieldValue] = [
        .bytes([]), .bytes([0]), .bytes([0xFF, 0x00, 0x80, 0x7F]), .bytes(Array(0...255)), .bytes(largeBytes),
    ]

    static let timestamps: [FieldValue] = [
        .timestamp(0), .timestamp(1_764_504_000_000), .timestamp(-1), .timestamp(-86_400_000),
        .timestamp(.max), .timestamp(.min),
    ]

    static let locations: [FieldValue] = {
        let base = Location(latitude: 37.3349, longitude: -122.009)
        var values: [FieldValue] = [.location(base)]
        let optionals: [WritableKeyPath<Location, Double?>] = [
            \.horizontalAccuracy, \.verticalAccuracy, \.altitude, \.speed, \.course,
        ]
        for (i, path) in optionals.enumerated() {  // each optional alone
            var l = base
            l[keyPath: path] = Double(i) + 0.25
            values.append(.location(l))
        }
        var withTime = base
        withTime.timestamp = 1_764_504_000_123
        values.append(.location(withTime))
        values.append(
            .location(
                Location(
                    latitude: -90, longitude: 180, horizontalAccuracy: 5, verticalAccuracy: -0.0, altitude: -.infinity,
                    speed: .nan, course: 359.9, timestamp: .min)))
        return values
    }()

    static let references: [FieldValue] = Reference.Action.allCases.map {
        .reference(Reference(recordName: "target-\($0.cloudKitName)", action: $0))
    } + [.reference(Reference(recordName: "", action: .none)), .reference(Reference(recordName: "ünï", action: .validate))]

    static let assets: [FieldValue] = [
        .asset(AssetReference(fileChecksum: String(repeating: "ab", count: 32), size: 1_048_576)),
        .asset(AssetReference(fileChecksum: "00", size: 0, receipt: "receipt-1")),
        .asset(AssetReference(fileChecksum: "", size: -1, receipt: "")),
        .asset(AssetReference(fileChecksum: "ff", size: .max, receipt: "r\u{e9}ceipt")),
    ]

    /// Every sample of one scalar type.
    static func values(of type: ScalarType) -> [FieldValue] {
        switch type {
        case .string: strings
        case .int64: int64s
        case .double: doubles
        case .bytes: bytes
        case .timestamp: timestamps
        case .location: locations
        case .reference: references
        case .asset: assets
        }
    }

    /// Every scalar sample of every type (small enough to use as test arguments; the 1 MiB blob included).
    static let allScalars: [FieldValue] = ScalarType.allCases.flatMap { values(of: $0) }

    static let stamp = RecordStamp(timestamp: 1_764_504_000_000, userRecordName: "_abc123", deviceID: "device-Ä")

    /// A record with one field of every scalar type, one list of every type, an empty list and system fields.
    static func richRecord(changeTag: String? = "tag-7", created: RecordStamp? = stamp, modified: RecordStamp? = stamp)
        -> Record
    {
        var r = Record(recordType: "Note", recordName: "note-ñ-1")
        r["title"] = .string("Grüße 🚀")
        r["count"] = .int64(-12345)
        r["score"] = .double(-0.0)
        r["blob"] = .bytes([1, 2, 3, 0xFF])
        r["when"] = .timestamp(1_764_504_000_000)
        r["where"] = Samples.locations.last!
        r["parent"] = .reference(Reference(recordName: "parent", action: .deleteSelf))
        r["file"] = .asset(AssetReference(fileChecksum: "cafe", size: 4096, receipt: "rcpt"))
        for type in ScalarType.allCases {
            r["list_\(type.cloudKitName)"] = .list(type, Array(values(of: type).filter { !isHuge($0) }.prefix(3)))
        }
        r["emptyList"] = .list(.timestamp, [])
        r.changeTag = changeTag
        r.created = created
        r.modified = modified
        return r
    }

    static func isHuge(_ v: FieldValue) -> Bool {
        if case .bytes(let b) = v { return b.count > 4096 }
        return false
    }

    /// A random record, for property tests. Values come from the samples above (without the 1 MiB blob).
    static func randomRecord(using g: inout SeededRandom) -> Record {
        let small = allScalars.filter { !isHuge($0) }
        var r = Record(recordType: "T\(Int.random(in: 0..<5, using: &g))", recordName: "r\(g.next() % 100_000)")
        for i in 0..<Int.random(in: 0...8, using: &g) {
            if Bool.random(using: &g) {
                r["f\(i)"] = small.randomElement(using: &g)!
            } else {
                let type = ScalarType.allCases.randomElement(using: &g)!
                let pool = values(of: type).filter { !isHuge($0) }
                r["f\(i)"] = .list(type, (0..<Int.random(in: 0...4, using: &g)).map { _ in pool.randomElement(using: &g)! })
            }
        }
        if Bool.random(using: &g) { r.changeTag = "t\(g.next() % 1000)" }
        if Bool.random(using: &g) { r.created = stamp }
        if Bool.random(using: &g) { r.modified = RecordStamp(timestamp: -5, userRecordName: "", deviceID: "d") }
        return r
    }
}
