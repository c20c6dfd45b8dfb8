import CloudletCore

/// Which schema: each container has one per environment.
public struct SchemaKey: Hashable, Sendable {
    public var container: String
    public var environment: CloudletCore.Environment

    public init(container: String, environment: CloudletCore.Environment) {
        self.container = container
        self.environment = environment
    }
}

extension SchemaKey {
    /// Orders schema keys the same way everywhere (checkpoints, deploys): by container, then environment.
    package static func inOrder(_ a: SchemaKey, _ b: SchemaKey) -> Bool {
        (a.container, a.environment.rawValue) < (b.container, b.environment.rawValue)
    }
}

/// The record types of one container and environment, each field's type (fixed once set) and index flags.
public struct RecordTypeSchema: Sendable, Hashable {
    public var name: String
    public var fields: [String: FieldType]
    /// Index flags by field; system fields by their ``SystemField`` names (`recordName`, `createdTimestamp`, …).
    public var indexes: [String: IndexFlags]
    /// Composite indexes by name (a Cloudlet extension).
    public var composites: [String: CompositeIndex]

    public init(
        name: String, fields: [String: FieldType] = [:], indexes: [String: IndexFlags] = [:],
        composites: [String: CompositeIndex] = [:]
    ) {
        self.name = name
        self.fields = fields
        self.indexes = indexes
        self.composites = composites
    }

    /// A field's type: a record field's, or a system field's.
    public func type(of field: String) -> FieldType? {
        SystemField(rawValue: field)?.type ?? fields[field]
    }
}

/// All schemas of a store. Development grows just in time as records are saved; production changes only by
/// ``Database/deploySchema()`` (additive) and development can be reset to production.
package struct SchemaCatalog: Sendable {
    package var types: [SchemaKey: [String: RecordTypeSchema]] = [:]

    package func recordType(_ key: SchemaKey, _ name: String) -> RecordTypeSchema? { types[key]?[name] }

    /// Whether `t` has each of `fields` with its value's type. Through the dictionary's indices: iterating its
    /// (name, value) pairs copied each value (a retain and a release) to read its type tag.
    private static func knows(_ fields: [String: FieldValue], _ t: RecordTypeSchema) -> Bool {
        var i = fields.startIndex
        while i != fields.endIndex {
            guard t.fields[fields.keys[i]] == fields.values[i].type else { return false }
            fields.formIndex(after: &i)
        }
        return true
    }

    /// The schema mutations saving `record` needs, or an error naming the field whose type does not match (any
    /// environment) or the type/field production does not have. `pending` holds additions made earlier in the
    /// same commit.
    package func additions(for record: Record, in key: SchemaKey, pending: [Mutation]) throws -> [Mutation] {
        // Fast path: the type and every field are known with the right types.
        if let t = types[key]?[record.recordType], Self.knows(record.fields, t) { return [] }
        var known = types[key]?[record.recordType]
        for case .schemaField(let k, let type, let field, let fieldType) in pending
        where k == key && type == record.recordType {
            if known == nil { known = RecordTypeSchema(name: type) }
            if let field, let fieldType { known!.fields[field] = fieldType }
        }
        if key.environment == .production {
            guard let known else {
                throw CloudletError.invalid(
                    "record type '\(record.recordType)' is not in the production schema of \(key.container); "
                        + "deploy the development schema first")
            }
            for (field, value) in record.fields {
                guard let t = known.fields[field] else {
                    throw CloudletError.invalid(
                        "field '\(field)' is not in the production schema of record type '\(record.recordType)'")
                }
                try check(field: field, value: value, expected: t, recordType: record.recordType)
            }
            return []
        }
        var out: [Mutation] = []
        if known == nil { out.append(.schemaField(key, recordType: record.recordType, field: nil, type: nil)) }
        for field in record.fields.keys.sorted() {
            let value = record.fields[field]!
            if let t = known?.fields[field] {
                try check(field: field, value: value, expected: t, recordType: record.recordType)
            } else {
                out.append(.schemaField(key, recordType: record.recordType, field: field, type: value.type))
            }
        }
        return out
    }

    private func check(field: String, value: FieldValue, expected: FieldType, recordType: String) throws {
        guard value.type != expected else { return }
        throw CloudletError.invalid(
            "field '\(field)' of record type '\(recordType)' has type \(expected); cannot save a \(value.type)")
    }

    mutating func apply(_ m: Mutation) {
        switch m {
        case .schemaField(let key, let type, let field, let fieldType):
            if types[key]?[type] == nil { types[key, default: [:]][type] = RecordTypeSchema(name: type) }
            if let field, let fieldType { types[key]![type]!.fields[field] = fieldType }
        case .schemaReset(let container):
            let prod = types[SchemaKey(container: container, environment: .production)] ?? [:]
            types[SchemaKey(container: container, environment: .development)] = prod
        case .index(.flags(let key, let type, let field, let flags)):
            if types[key]?[type] == nil { types[key, default: [:]][type] = RecordTypeSchema(name: type) }
            types[key]![type]!.indexes[field, default: []].formUnion(flags)
        case .index(.composite(let key, let type, let name, let components)):
            if types[key]?[type] == nil { types[key, default: [:]][type] = RecordTypeSchema(name: type) }
            types[key]![type]!.composites[name] = components.isEmpty ? nil : CompositeIndex(name: name, components: components)
        default: break
        }
    }

    /// The mutations that promote development to production: every type, field and index flag production lacks.
    /// Refuses (and names) a field whose type differs between the two, and anything production has that development
    /// lacks (deploying must never drop it).
    func deployment(container: String) throws -> [Mutation] {
        let dev = types[SchemaKey(container: container, environment: .development)] ?? [:]
        let prodKey = SchemaKey(container: container, environment: .production)
        let prod = types[prodKey] ?? [:]
        var out: [Mutation] = []
        for name in dev.keys.sorted() {
            let d = dev[name]!
            let p = prod[name]
            if p == nil { out.append(.schemaField(prodKey, recordType: name, field: nil, type: nil)) }
            for field in d.fields.keys.sorted() {
                let t = d.fields[field]!
                if let existing = p?.fields[field] {
                    if existing != t {
                        throw CloudletError.invalid(
                            "cannot deploy: field '\(field)' of record type '\(name)' is \(existing) in production "
                                + "but \(t) in development")
                    }
                } else {
                    out.append(.schemaField(prodKey, recordType: name, field: field, type: t))
                }
            }
            for field in d.indexes.keys.sorted() {
                let missing = d.indexes[field]!.subtracting(p?.indexes[field] ?? [])
                if !missing.isEmpty { out.append(.index(.flags(prodKey, recordType: name, field: field, missing))) }
            }
            for index in d.composites.keys.sorted() {
                let c = d.composites[index]!
                if let existing = p?.composites[index] {
                    if existing != c {
                        throw CloudletError.invalid(
                            "cannot deploy: index '\(index)' of record type '\(name)' is \(existing) in production but \(c) in development")
                    }
                } else {
                    out.append(.index(.composite(prodKey, recordType: name, name: index, components: c.components)))
                }
            }
        }
        try checkNothingDropped(dev: dev, prod: prod)
        return out
    }

    /// Throws, naming it, if production has a type, field or index flag that development does not.
    private func checkNothingDropped(dev: [String: RecordTypeSchema], prod: [String: RecordTypeSchema]) throws {
        for name in prod.keys.sorted() {
            let p = prod[name]!
            guard let d = dev[name] else {
                throw CloudletError.invalid(
                    "cannot deploy: record type '\(name)' is in production but not in development; deploying would drop it")
            }
            for field in p.fields.keys.sorted() where d.fields[field] == nil {
                throw CloudletError.invalid(
                    "cannot deploy: field '\(field)' of record type '\(name)' is in production but not in development")
            }
            for field in p.indexes.keys.sorted() {
                let lost = p.indexes[field]!.subtracting(d.indexes[field] ?? [])
                if !lost.isEmpty {
                    throw CloudletError.invalid(
                        "cannot deploy: field '\(field)' of record type '\(name)' is \(lost) in production but not in "
                            + "development; deploying would drop the index")
                }
            }
            for index in p.composites.keys.sorted() where d.composites[index] == nil {
                throw CloudletError.invalid(
                    "cannot deploy: index '\(index)' of record type '\(name)' is in production but not in development; "
                        + "deploying would drop it")
            }
        }
    }
}
