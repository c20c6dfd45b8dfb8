import CloudletCore

extension SchemaCatalog {
    /// Every index the schemas' flags call for, in every container and environment.
    func indexDefinitions() -> Set<IndexDefinition> {
        var out: Set<IndexDefinition> = []
        for (key, types) in types {
            for (name, t) in types {
                for (field, flags) in t.indexes {
                    guard let ft = t.type(of: field) else { continue }
                    for kind in IndexKind.kinds(for: flags, type: ft, field: field) {
                        out.insert(IndexDefinition(schema: key, recordType: name, field: field, kind: kind))
                    }
                }
                for c in t.composites.values {
                    out.insert(IndexDefinition(schema: key, recordType: name, field: c.name, kind: .composite, components: c.components))
                }
            }
        }
        return out
    }

    /// The flag mutations that add `flags` to a field (nothing if it has them). Refuses, naming the field, flags that
    /// do not fit its type and fields the schema does not have.
    func indexAdditions(_ key: SchemaKey, recordType name: String, field: String, _ flags: IndexFlags) throws -> [Mutation] {
        let field = SystemField(name: field)?.rawValue ?? field
        guard let t = recordType(key, name) else {
            throw CloudletError.invalid(
                "record type '\(name)' is not in the \(key.environment.rawValue) schema of \(key.container)")
        }
        guard let ft = t.type(of: field) else {
            throw CloudletError.invalid("field '\(field)' is not in the schema of record type '\(name)'")
        }
        if let problem = IndexFlags.problem(flags, for: ft, system: SystemField(rawValue: field) != nil) {
            throw CloudletError.invalid("field '\(field)' of record type '\(name)' cannot be \(flags): \(problem)")
        }
        let missing = flags.subtracting(t.indexes[field] ?? [])
        return missing.isEmpty ? [] : [.index(.flags(key, recordType: name, field: field, missing))]
    }
}

extension SchemaCatalog {
    /// The mutation that declares composite index `index` on a record type (nothing if it is declared so already).
    /// Refuses, naming the index and field, an index that does not fit the type (``CompositeIndex/problem(recordType:type:)``)
    /// and one whose name another index of the type has with other fields.
    func compositeAddition(_ key: SchemaKey, recordType name: String, _ index: CompositeIndex) throws -> [Mutation] {
        guard let t = recordType(key, name) else {
            throw CloudletError.invalid(
                "record type '\(name)' is not in the \(key.environment.rawValue) schema of \(key.container)")
        }
        if let problem = index.problem(recordType: name, type: t.type(of:)) { throw CloudletError.invalid(problem) }
        if let existing = t.composites[index.name] {
            guard existing == index else {
                throw CloudletError.invalid(
                    "index '\(index.name)' of record type '\(name)' is already declared as \(existing); remove it first")
            }
            return []
        }
        return [.index(.composite(key, recordType: name, name: index.name, components: index.components))]
    }

    /// The mutation that removes composite index `index` from a record type; refuses one the type does not have.
    func compositeRemoval(_ key: SchemaKey, recordType name: String, index: String) throws -> [Mutation] {
        guard recordType(key, name)?.composites[index] != nil else {
            throw CloudletError.invalid("record type '\(name)' has no index '\(index)' in the \(key.environment.rawValue) schema")
        }
        return [.index(.composite(key, recordType: name, name: index, components: []))]
    }
}

/// What a partition must define or drop so that its indexes are exactly those the schemas call for.
enum IndexReconciler {
    static func mutations(schema: SchemaCatalog, indexes: IndexState) -> [Mutation] {
        let desired = schema.indexDefinitions()
        let current = Set(indexes.definitions.keys)
        let order: (IndexDefinition, IndexDefinition) -> Bool = { "\($0)" < "\($1)" }
        return current.subtracting(desired).sorted(by: order).map { .index(.drop($0)) }
            + desired.subtracting(current).sorted(by: order).map { .index(.define($0)) }
    }
}
