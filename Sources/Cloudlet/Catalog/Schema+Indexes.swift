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
