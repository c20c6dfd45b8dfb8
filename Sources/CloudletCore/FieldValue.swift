import Foundation

/// The type of a field's single value. Raw values are the on-disk type tags.
public enum ScalarType: UInt8, Sendable, Hashable, CaseIterable {
    case string = 1, int64, double, bytes, timestamp, location, reference, asset

    /// CloudKit's name (`STRING`, `INT64`, `DOUBLE`, `BYTES`, `TIMESTAMP`, `LOCATION`, `REFERENCE`, `ASSETID`).
    public var cloudKitName: String {
        switch self {
        case .string: "STRING"
        case .int64: "INT64"
        case .double: "DOUBLE"
        case .bytes: "BYTES"
        case .timestamp: "TIMESTAMP"
        case .location: "LOCATION"
        case .reference: "REFERENCE"
        case .asset: "ASSETID"
        }
    }
}

/// A field's type: a scalar, or a list of one scalar type (`STRING_LIST`, …). Fixed once a record type has it.
public struct FieldType: Sendable, Hashable, CustomStringConvertible {
    public var scalar: ScalarType
    public var isList: Bool

    public init(_ scalar: ScalarType, list: Bool = false) {
        self.scalar = scalar
        self.isList = list
    }

    /// CloudKit's type tag: `STRING`, `INT64_LIST`, …
    public var description: String { isList ? scalar.cloudKitName + "_LIST" : scalar.cloudKitName }

    /// Parses a CloudKit type tag (`STRING`, `TIMESTAMP_LIST`, `ASSET` or `ASSETID`).
    public init?(cloudKitName: String) {
        var name = cloudKitName
        var list = false
        if name.hasSuffix("_LIST") {
            list = true
            name.removeLast(5)
        }
        if name == "ASSET" { name = "ASSETID" }
        guard let s = ScalarType.allCases.first(where: { $0.cloudKitName == name }) else { return nil }
        self.init(s, list: list)
    }

    /// One byte on disk: the scalar tag, with 0x80 set for lists.
    public var tag: UInt8 { scalar.rawValue | (isList ? 0x80 : 0) }
    public init?(tag: UInt8) {
        guard let s = ScalarType(rawValue: tag & 0x7F) else { return nil }
        self.init(s, list: tag & 0x80 != 0)
    }
}

/// A geographic location (CloudKit `LOCATION`); optional members are absent when not known.
public struct Location: Sendable, Hashable {
    public var latitude: Double
    public var longitude: Double
    public var horizontalAccuracy: Double?
    public var verticalAccuracy: Double?
    public var altitude: Double?
    public var speed: Double?
    public var course: Double?
    /// Milliseconds since 1970.
    public var timestamp: Int64?

    public init(
        latitude: Double, longitude: Double, horizontalAccuracy: Double? = nil, verticalAccuracy: Double? = nil,
        altitude: Double? = nil, speed: Double? = nil, course: Double? = nil, timestamp: Int64? = nil
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.altitude = altitude
        self.speed = speed
        self.course = course
        self.timestamp = timestamp
    }
}

/// A reference to another record of the same zone (CloudKit `REFERENCE`).
public struct Reference: Sendable, Hashable {
    /// What happens to the referring record when the target goes (`NONE`, `DELETE_SELF`, `VALIDATE`).
    public enum Action: UInt8, Sendable, Hashable, CaseIterable {
        /// Nothing.
        case none = 0
        /// Deleting the target deletes the referring record too (cascading, in the same commit).
        case deleteSelf = 1
        /// The target must exist when the referring record is saved.
        case validate = 2

        /// CloudKit's name: `NONE`, `DELETE_SELF`, `VALIDATE`.
        public var cloudKitName: String {
            switch self {
            case .none: "NONE"
            case .deleteSelf: "DELETE_SELF"
            case .validate: "VALIDATE"
            }
        }
    }

    public var recordName: String
    public var action: Action

    public init(recordName: String, action: Action = .none) {
        self.recordName = recordName
        self.action = action
    }
}

/// A reference to an asset's bytes (CloudKit `ASSETID`); the bytes themselves are stored apart from the record, in
/// the store's blob store, named by their SHA-256 (`docs/assets.md`).
///
/// A record stores ``fileChecksum`` and ``size``. A new asset is made from a file or from bytes
/// (``init(contentsOfFile:)``, ``init(data:)``): saving the record copies them into the store first, and the saved
/// record carries their checksum and size. Over the Web Services an asset comes from an upload and carries its
/// ``receipt`` until the record that uses it is saved.
public struct AssetReference: Sendable, Hashable {
    /// Hex SHA-256 of the file (64 lowercase hex digits); empty for a new asset not yet saved.
    public var fileChecksum: String
    public var size: Int64
    /// Opaque receipt from the upload step, if any (not kept once the record is saved).
    public var receipt: String?
    /// A file on this machine whose bytes become the asset when its record is saved (``init(contentsOfFile:)``).
    /// Never stored.
    public private(set) var sourceFile: String?
    /// Bytes that become the asset when its record is saved (``init(data:)``). Never stored.
    public private(set) var sourceData: [UInt8]?
    /// Where a server serves the file: set on assets read through a client (the server signs it, and it expires).
    /// Never stored, and not part of equality (two reads of one record get different URLs).
    public var downloadURL: String?

    public init(fileChecksum: String, size: Int64, receipt: String? = nil) {
        self.fileChecksum = fileChecksum
        self.size = size
        self.receipt = receipt
    }

    /// A new asset with the bytes of the file at `path`, copied into the store when its record is saved (the file
    /// is read then, not now; later changes to it do not change the asset).
    public init(contentsOfFile path: String) {
        self.init(fileChecksum: "", size: 0)
        sourceFile = path
    }

    /// A new asset holding `data`, written to the store when its record is saved.
    public init(data: [UInt8]) {
        self.init(fileChecksum: "", size: Int64(data.count))
        sourceData = data
    }

    /// Whether saving the record must first put this asset's bytes into the store (it was made from a file or
    /// bytes and has no checksum yet).
    public var needsImport: Bool { fileChecksum.isEmpty && (sourceFile != nil || sourceData != nil) }

    /// The stored form: checksum and size, without receipt or source.
    public var stored: AssetReference { AssetReference(fileChecksum: fileChecksum, size: size) }

    public static func == (a: AssetReference, b: AssetReference) -> Bool {
        a.fileChecksum == b.fileChecksum && a.size == b.size && a.receipt == b.receipt && a.sourceFile == b.sourceFile
            && a.sourceData == b.sourceData
    }

    public func hash(into h: inout Hasher) {
        h.combine(fileChecksum)
        h.combine(size)
        h.combine(receipt)
        h.combine(sourceFile)
        h.combine(sourceData)
    }
}

/// One field value of a record.
public enum FieldValue: Sendable, Hashable {
    case string(String)
    case int64(Int64)
    case double(Double)
    case bytes([UInt8])
    /// Milliseconds since 1970-01-01 UTC (CloudKit `TIMESTAMP`).
    case timestamp(Int64)
    case location(Location)
    case reference(Reference)
    case asset(AssetReference)
    /// A list of values of one scalar type; the type is kept so that an empty list still has one.
    case list(ScalarType, [FieldValue])

    /// A timestamp from a `Date` (millisecond precision). The date must be one a timestamp can hold
    /// (``checkedDate(_:)``); for dates from input, use that.
    public static func date(_ d: Date) -> FieldValue {
        guard let value = checkedDate(d) else { preconditionFailure("\(d) is outside the range of a timestamp") }
        return value
    }

    /// A timestamp from a `Date` (millisecond precision), or nil when its milliseconds since 1970 are not a finite
    /// number that fits an Int64 (a date read from input, such as `CAST(1e300, 'NSDate')` in a predicate).
    public static func checkedDate(_ d: Date) -> FieldValue? {
        let ms = (d.timeIntervalSince1970 * 1000).rounded()
        guard let exact = Int64(exactly: ms) else { return nil }
        return .timestamp(exact)
    }

    /// The value's type.
    public var type: FieldType {
        switch self {
        case .string: FieldType(.string)
        case .int64: FieldType(.int64)
        case .double: FieldType(.double)
        case .bytes: FieldType(.bytes)
        case .timestamp: FieldType(.timestamp)
        case .location: FieldType(.location)
        case .reference: FieldType(.reference)
        case .asset: FieldType(.asset)
        case .list(let s, _): FieldType(s, list: true)
        }
    }

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var int64Value: Int64? { if case .int64(let v) = self { v } else { nil } }
    public var doubleValue: Double? { if case .double(let v) = self { v } else { nil } }
    public var referenceValue: Reference? { if case .reference(let r) = self { r } else { nil } }
    public var dateValue: Date? {
        if case .timestamp(let ms) = self { Date(timeIntervalSince1970: Double(ms) / 1000) } else { nil }
    }

    /// Every reference in this value (the value itself, or the members of a reference list).
    public var references: [Reference] {
        switch self {
        case .reference(let r): [r]
        case .list(.reference, let items): items.compactMap(\.referenceValue)
        default: []
        }
    }

    /// Every asset in this value (the value itself, or the members of an asset list).
    public var assets: [AssetReference] {
        switch self {
        case .asset(let a): [a]
        case .list(.asset, let items): items.compactMap { if case .asset(let a) = $0 { a } else { nil } }
        default: []
        }
    }

    /// The value with each asset replaced by `transform(asset)` (the value itself, or the members of an asset list).
    public func mappingAssets(_ transform: (AssetReference) throws -> AssetReference) rethrows -> FieldValue {
        switch self {
        case .asset(let a): return .asset(try transform(a))
        case .list(.asset, let items):
            return .list(.asset, try items.map { if case .asset(let a) = $0 { .asset(try transform(a)) } else { $0 } })
        default: return self
        }
    }

    /// Checks that a list holds only scalars of its declared type; names `field` in the error.
    public func validate(field: String) throws {
        guard case .list(let s, let items) = self else { return }
        for (i, item) in items.enumerated() {
            if case .list = item {
                throw CloudletError.invalid("field '\(field)': a list cannot contain a list (item \(i))")
            }
            if item.type.scalar != s {
                throw CloudletError.invalid(
                    "field '\(field)': item \(i) of a \(FieldType(s, list: true)) is a \(item.type)")
            }
        }
    }
}

extension FieldValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int64(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
}
