/// A parsed JSON document, keeping what CloudKit's wire format needs to tell apart: integers from fractions (a
/// number keeps its literal text), `true` from `1`, and a missing key from `null`.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The member `key` of an object; nil for a missing key and for non-objects.
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var numberValue: JSONNumber? { if case .number(let n) = self { n } else { nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }

    /// A short name of the value's JSON kind, for error messages ("a string", "an object", …).
    public var kindDescription: String {
        switch self {
        case .null: "null"
        case .bool(let b): b ? "true" : "false"
        case .number(let n): n.isInteger ? "an integer" : "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A JSON number as written: exact integers survive (an `Int64` beyond 2^53 keeps every digit), and whether it
/// was written as an integer is known.
public struct JSONNumber: Sendable, Equatable, CustomStringConvertible {
    /// The literal, e.g. `-12`, `3.5e2`.
    public let text: String
    /// True when the literal has no fraction and no exponent.
    public let isInteger: Bool

    public init(text: String, isInteger: Bool) {
        self.text = text
        self.isInteger = isInteger
    }

    /// The exact value when the literal is an integer that fits in 64 bits.
    public var int64: Int64? { isInteger ? Int64(text) : nil }
    /// The value as a double (the nearest one).
    public var double: Double { Double(text) ?? .nan }
    public var description: String { text }
}

// MARK: - Building and reading values (tools' `--json` output, exports)

extension JSONValue {
    public static func int<T: BinaryInteger>(_ v: T) -> JSONValue { .number(JSONNumber(text: String(v), isInteger: true)) }

    /// A double as the shortest text that reads back to the same bits; NaN and the infinities as the strings
    /// `"NaN"`, `"Infinity"`, `"-Infinity"` (JSON has no such numbers), as ``JSONWriter/double(_:)`` writes them.
    public static func double(_ v: Double) -> JSONValue {
        guard v.isFinite else { return .string(v.isNaN ? "NaN" : v < 0 ? "-Infinity" : "Infinity") }
        return .number(JSONNumber(text: v.description, isInteger: false))
    }

    /// An object of `members`, leaving out nils (a later member of the same name wins). Objects are written with
    /// their keys sorted.
    public static func members(_ members: [(String, JSONValue?)]) -> JSONValue {
        var o: [String: JSONValue] = [:]
        for (k, v) in members { if let v { o[k] = v } }
        return .object(o)
    }

    /// ``members(_:)-([(String, JSONValue?)])`` from a literal: `.members(["a": .int(1), "b": nil])`.
    public static func members(_ members: KeyValuePairs<String, JSONValue?>) -> JSONValue {
        .members(members.map { ($0.key, $0.value) })
    }

    /// An integer that fits 64 bits; nil for anything else.
    public var int64Value: Int64? { numberValue?.int64 }

    /// A number, or one of the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.
    public var doubleValue: Double? {
        switch self {
        case .number(let n): n.double
        case .string("NaN"): .nan
        case .string("Infinity"): .infinity
        case .string("-Infinity"): -.infinity
        default: nil
        }
    }

    /// Compact JSON text, objects' keys sorted.
    public func serialized() -> String {
        var w = JSONWriter()
        w.value(self)
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// Parses one JSON text.
    public static func parse(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }
}
