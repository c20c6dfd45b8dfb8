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
    /// (tuple of order-preserving keys, record name) in key order: a composite index (``CompositeIndex``).
    case composite = 5

    var description: String {
        switch self {
        case .equality: "equality"
        case .ordered: "ordered"
        case .text: "full-text"
        case .spatial: "spatial"
        case .composite: "composite"
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

/// One field of a composite index, in key order, ascending or descending.
public struct IndexComponent: Sendable, Hashable, CustomStringConvertible {
    /// The field; system fields by their ``SystemField`` names.
    public var field: String
    public var descending: Bool

    public init(_ field: String, descending: Bool = false) {
        self.field = field
        self.descending = descending
    }

    /// As the schema language writes it: `field` or `field DESC`, a system field by its quoted name
    /// (`"___createTime"`).
    public var description: String {
        let name = SchemaLanguage.systemFields.first { $0.field == field }.map { "\"\($0.name)\"" } ?? SchemaLanguage.identifier(field)
        return name + (descending ? " DESC" : "")
    }
}

/// A composite index a record type declares (`INDEX name (field1, field2 DESC)` in the schema language, a Cloudlet
/// extension: CloudKit has none): every record of the type filed under the tuple of its values of the fields, in
/// order, each ascending or descending (docs/index-layer.md, "Composite indexes"). A query with equalities on a prefix
/// of the fields and a sort on, or a range of, the next one reads one range of it.
public struct CompositeIndex: Sendable, Hashable, CustomStringConvertible {
    public var name: String
    public var components: [IndexComponent]

    public init(name: String, components: [IndexComponent]) {
        self.name = name
        self.components = components
    }

    /// Fields an index takes: 2 to this many.
    public static let maxComponents = 8

    /// The field types a component may have: the scalar types that order (not LOCATION, ASSET or lists).
    public static let componentTypes: [ScalarType] = [.int64, .double, .timestamp, .string, .reference, .bytes]

    /// As the schema language writes it: `name (a, b DESC)`.
    public var description: String {
        "\(SchemaLanguage.identifier(name)) (\(components.map(\.description).joined(separator: ", ")))"
    }

    /// Why this index cannot be declared on record type `recordType` whose fields' types `type(of:)` gives (nil when
    /// it can): an invalid name, fewer than 2 or more than ``maxComponents`` fields, a field twice, a field the type
    /// lacks or whose type does not order. The message names the index and the field.
    func problem(recordType: String, type: (String) -> FieldType?) -> String? {
        let what = "index '\(name)' of record type '\(recordType)'"
        if (try? Names.validateIdentifier(name, what: "index name")) == nil {
            return "\(what): the name must start with a letter and contain only letters, digits and underscores"
        }
        guard (2...Self.maxComponents).contains(components.count) else {
            return "\(what) has \(components.count) field\(components.count == 1 ? "" : "s"); a composite index takes 2 to \(Self.maxComponents)"
        }
        var seen: Set<String> = []
        for c in components {
            guard seen.insert(c.field).inserted else { return "\(what) names field '\(c.field)' twice" }
            guard let t = type(c.field) else { return "\(what): field '\(c.field)' is not in the schema of record type '\(recordType)'" }
            guard !t.isList, Self.componentTypes.contains(t.scalar) else {
                return "\(what): field '\(c.field)' is \(SchemaLanguage.typeName(t)); a composite index takes "
                    + "INT64, DOUBLE, TIMESTAMP, STRING, REFERENCE and BYTES fields"
            }
        }
        return nil
    }
}

/// One index a partition maintains: a kind on a field of a record type, in one container's environment — or a
/// composite index, whose `field` is its name and `components` its fields.
package struct IndexDefinition: Hashable, Sendable, CustomStringConvertible {
    package var schema: SchemaKey
    var recordType: String
    /// The indexed field; a composite index's name.
    var field: String
    var kind: IndexKind
    /// A composite index's fields in key order; empty for the other kinds.
    var components: [IndexComponent] = []

    var typeKey: TypeKey { TypeKey(schema: schema, recordType: recordType) }

    /// The fields whose values the index's keys are made of.
    var sourceFields: [String] { kind == .composite ? components.map(\.field) : [field] }

    /// The maintainer of this index.
    var maintainer: any IndexMaintainer {
        switch kind {
        case .equality: EqualityMaintainer()
        case .ordered: OrderedMaintainer()
        case .text: TextMaintainer()
        case .spatial: SpatialMaintainer()
        case .composite: CompositeMaintainer(components: components)
        }
    }

    /// The value keys record `name` whose stored values are `values` is filed under; nil when it is not in the index
    /// (no stored values, or a source field not stored yet: the record predates the index and its build has not
    /// reached it).
    func valueKeys(_ values: StoredValues.Values?, name: String) -> [[UInt8]]? {
        guard let values else { return nil }
        var vs: [FieldValue?] = []
        for f in sourceFields {
            guard let v = values[f] else { return nil }
            vs.append(v)
        }
        return maintainer.valueKeys(vs, name: name)
    }

    package var description: String {
        let what = kind == .composite
            ? "composite index '\(field)' (\(components.map(\.description).joined(separator: ", ")))" : "\(kind) index on '\(field)'"
        return "\(what) of '\(recordType)' (\(schema.container), \(schema.environment.rawValue))"
    }
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
    /// A composite index declared on a record type in a schema, replacing one of the same name; `components` empty:
    /// the index is removed. A catalog mutation.
    case composite(SchemaKey, recordType: String, name: String, components: [IndexComponent])

    /// Whether this is a schema change (the catalog's), not a partition's index definition or drop.
    var isCatalogMutation: Bool {
        switch self {
        case .flags, .composite: true
        case .define, .drop: false
        }
    }

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
        case .composite(let key, let type, let name, let components):
            w.u8(4)
            Self.encode(key, into: &w)
            w.string(type)
            w.string(name)
            Self.encode(components, into: &w)
        }
    }

    /// `count varint · count × (field string · descending u8)`.
    static func encode(_ components: [IndexComponent], into w: inout ByteWriter) {
        w.varint(components.count)
        for c in components {
            w.string(c.field)
            w.u8(c.descending ? 1 : 0)
        }
    }

    static func decodeComponents(_ r: inout ByteReader) throws -> [IndexComponent] {
        var out: [IndexComponent] = []
        for _ in 0..<(try r.length(unit: 2)) {
            let field = try r.string()
            let desc = try r.u8()
            guard desc <= 1 else { throw CloudletError.corruption("bad index component direction \(desc)") }
            out.append(IndexComponent(field, descending: desc == 1))
        }
        return out
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
        case 4:
            let key = try decodeSchemaKey(&r)
            let type = try r.string()
            let name = try r.string()
            return .composite(key, recordType: type, name: name, components: try decodeComponents(&r))
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
        if d.kind == .composite { encode(d.components, into: &w) }
    }

    static func decodeDefinition(_ r: inout ByteReader) throws -> IndexDefinition {
        let key = try decodeSchemaKey(&r)
        let type = try r.string()
        let field = try r.string()
        let k = try r.u8()
        guard let kind = IndexKind(rawValue: k) else { throw CloudletError.corruption("bad index kind \(k)") }
        let components = kind == .composite ? try decodeComponents(&r) : []
        return IndexDefinition(schema: key, recordType: type, field: field, kind: kind, components: components)
    }
}
