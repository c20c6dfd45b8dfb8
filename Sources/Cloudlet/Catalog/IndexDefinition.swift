import CloudletCore

/// A field's index options in a schema (CloudKit's QUERYABLE, SORTABLE, SEARCHABLE).
public struct IndexFlags: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Equality lookups: EQUALS, NOT_EQUALS, IN, NOT_IN, BEGINS_WITH, list membership; NEAR on a LOCATION.
    public static let queryable = IndexFlags(rawValue: 1)
    /// Ranges (<, <=, >, >=, BETWEEN) and sorting (by distance for a LOCATION).
    public static let sortable = IndexFlags(rawValue: 2)
    /// Full-text search (CONTAINS_ALL_TOKENS, CONTAINS_ANY_TOKENS, `self CONTAINS`) on STRING and LIST<STRING>.
    public static let searchable = IndexFlags(rawValue: 4)

    /// The schema language's words: `QUERYABLE SORTABLE SEARCHABLE`.
    public var description: String {
        var words: [String] = []
        if contains(.queryable) { words.append("QUERYABLE") }
        if contains(.sortable) { words.append("SORTABLE") }
        if contains(.searchable) { words.append("SEARCHABLE") }
        return words.joined(separator: " ")
    }

    /// The word CloudKit uses in "Field 'x' is not marked …".
    var adjective: String {
        if contains(.searchable) { return "searchable" }
        if contains(.sortable) { return "sortable" }
        return "queryable"
    }

    /// Why these flags do not fit a field of `type` (nil when they do). `system` for system fields, which are not
    /// searchable.
    static func problem(_ flags: IndexFlags, for type: FieldType, system: Bool = false) -> String? {
        if type.scalar == .asset && !flags.isEmpty { return "ASSET fields cannot be indexed" }
        if flags.contains(.searchable) && (type.scalar != .string || system) {
            return "only STRING and LIST<STRING> fields can be SEARCHABLE"
        }
        if flags.contains(.sortable) && type.isList { return "LIST fields cannot be SORTABLE" }
        return nil
    }
}

/// The physical index kinds a partition maintains.
enum IndexKind: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Value (case-folded) → records: EQUALS, IN, list membership.
    case equality = 1
    /// (order-preserving key, record name) in key order: ranges, prefixes, sort order.
    case ordered = 2
    /// Token → records.
    case text = 3
    /// Grid cell → records, for LOCATION fields.
    case spatial = 4

    var description: String {
        switch self {
        case .equality: "equality"
        case .ordered: "ordered"
        case .text: "full-text"
        case .spatial: "spatial"
        }
    }

    /// The kinds that serve `flags` on a field of `type`. QUERYABLE strings also get an ordered index (for
    /// BEGINS_WITH); a LOCATION gets a spatial index for either flag; `recordName` needs no ordered index, since every
    /// record type keeps its record names in order anyway.
    static func kinds(for flags: IndexFlags, type: FieldType, field: String) -> Set<IndexKind> {
        var out: Set<IndexKind> = []
        if type.scalar == .location && !type.isList {
            if !flags.intersection([.queryable, .sortable]).isEmpty { out.insert(.spatial) }
            return out
        }
        let isName = field == SystemField.recordName.rawValue
        if flags.contains(.queryable) {
            out.insert(.equality)
            if type.scalar == .string && !isName { out.insert(.ordered) }
        }
        if flags.contains(.sortable) && !type.isList && !isName { out.insert(.ordered) }
        if flags.contains(.searchable) { out.insert(.text) }
        return out
    }
}

/// One index a partition maintains: a kind on a field of a record type, in one container's environment.
package struct IndexDefinition: Hashable, Sendable, CustomStringConvertible {
    package var schema: SchemaKey
    var recordType: String
    var field: String
    var kind: IndexKind

    var typeKey: TypeKey { TypeKey(schema: schema, recordType: recordType) }
    package var description: String { "\(kind) index on '\(field)' of '\(recordType)' (\(schema.container), \(schema.environment.rawValue))" }
}

/// A record type in one container's environment.
struct TypeKey: Hashable, Sendable {
    package var schema: SchemaKey
    var recordType: String
}

/// Whether an index is complete.
enum IndexStatus: UInt8, Sendable {
    /// Maintained for every change since it was defined; the records that were already there are still being
    /// added by a background build.
    case building = 0
    /// Holds every live record of its type.
    case ready = 1
}

/// Index changes in a commit (mutation kind 8 of docs/record-format.md).
package enum IndexMutation: Sendable, Hashable {
    /// Flags added to a field of a record type in a schema: a catalog mutation (``Catalog``).
    case flags(SchemaKey, recordType: String, field: String, IndexFlags)
    /// An index the partition maintains from this commit on; ready once a background build has added the records
    /// that were already there.
    case define(IndexDefinition)
    /// An index the partition no longer maintains (development schema reset).
    case drop(IndexDefinition)

    func encode(into w: inout ByteWriter) {
        switch self {
        case .flags(let key, let type, let field, let flags):
            w.u8(1)
            Self.encode(key, into: &w)
            w.string(type)
            w.string(field)
            w.u8(flags.rawValue)
        case .define(let d), .drop(let d):
            if case .define = self { w.u8(2) } else { w.u8(3) }
            Self.encode(d, into: &w)
        }
    }

    static func decode(_ r: inout ByteReader) throws -> IndexMutation {
        let kind = try r.u8()
        switch kind {
        case 1:
            let key = try decodeSchemaKey(&r)
            let type = try r.string()
            let field = try r.string()
            let flags = IndexFlags(rawValue: try r.u8())
            guard flags.rawValue & ~0x07 == 0 else { throw CloudletError.corruption("commit payload: bad index flags \(flags.rawValue)") }
            return .flags(key, recordType: type, field: field, flags)
        case 2: return .define(try decodeDefinition(&r))
        case 3: return .drop(try decodeDefinition(&r))
        default: throw CloudletError.corruption("commit payload: unknown index mutation \(kind)")
        }
    }

    static func encode(_ key: SchemaKey, into w: inout ByteWriter) {
        w.string(key.container)
        w.u8(key.environment == .production ? 1 : 0)
    }

    static func decodeSchemaKey(_ r: inout ByteReader) throws -> SchemaKey {
        let container = try r.string()
        let env = try r.u8()
        guard env <= 1 else { throw CloudletError.corruption("bad environment \(env)") }
        return SchemaKey(container: container, environment: env == 1 ? .production : .development)
    }

    static func encode(_ d: IndexDefinition, into w: inout ByteWriter) {
        encode(d.schema, into: &w)
        w.string(d.recordType)
        w.string(d.field)
        w.u8(d.kind.rawValue)
    }

    static func decodeDefinition(_ r: inout ByteReader) throws -> IndexDefinition {
        let key = try decodeSchemaKey(&r)
        let type = try r.string()
        let field = try r.string()
        let k = try r.u8()
        guard let kind = IndexKind(rawValue: k) else { throw CloudletError.corruption("bad index kind \(k)") }
        return IndexDefinition(schema: key, recordType: type, field: field, kind: kind)
    }
}
