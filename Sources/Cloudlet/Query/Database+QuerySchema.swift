import CloudletConcurrency
import CloudletCore

extension Comparator {
    /// The index flag a field needs for this comparator (CloudKit: equality and prefixes need QUERYABLE, ranges
    /// SORTABLE, token searches SEARCHABLE).
    var requiredFlag: IndexFlags {
        switch self {
        case .lessThan, .lessThanOrEquals, .greaterThan, .greaterThanOrEquals: .sortable
        case .containsAllTokens, .containsAnyTokens: .searchable
        default: .queryable
        }
    }

    /// The kind of field this comparator needs, as an error message says it, when a field of `type` cannot match it
    /// at all (``Comparison/matches(_:)`` is false for every record); nil when it can. Only comparators whose field
    /// type alone rules them out: NEAR, the prefix and the token comparators. (For the others the value decides.)
    func fieldNeeded(by type: FieldType) -> String? {
        switch self {
        case .near: type == FieldType(.location) ? nil : "a LOCATION field"
        case .beginsWith, .notBeginsWith: type == FieldType(.string) ? nil : "a STRING field"
        case .listMemberBeginsWith, .notListMemberBeginsWith, .containsAllTokens, .containsAnyTokens:
            type.scalar == .string ? nil : "a STRING or STRING_LIST field"
        default: nil
        }
    }
}

extension Database {
    /// Checks a query against the schema and resolves what it needs. Production refuses an unknown type or field
    /// and a field without the index flag its comparison or sort needs, naming the field as CloudKit does
    /// (`Field 'x' is not marked queryable`). Development adds the missing flags just in time (when `addIndexes`),
    /// so the indexes build in the background. Returns the prepared query and notes for the plan.
    func prepare(_ query: Query, addIndexes: Bool) async throws -> (PreparedQuery, [String]) {
        let key = SchemaKey(container: id.container, environment: id.environment)
        if query.recordType == Share.recordType { return (try prepareShareQuery(query, key), []) }
        try validateShape(query)
        let production = id.environment == .production
        var schema = store.schemaSnapshot()
        guard var type = schema.recordType(key, query.recordType) else {
            throw CloudletError.invalid(
                "record type '\(query.recordType)' is not in the \(id.environment.rawValue) schema of \(id.container)"
                    + (production ? "; deploy the development schema first" : " (no record of that type was ever saved)"))
        }
        var notes: [String] = []
        var additions: [(field: String, flag: IndexFlags)] = []
        for (field, flag) in requirements(query, type) {
            if field == fullTextField {
                // `self CONTAINS` on a type without any text field.
                if production {
                    throw CloudletError.invalid("record type '\(query.recordType)' has no SEARCHABLE field to search")
                }
                notes.append("record type '\(query.recordType)' has no text field: a full-text search matches nothing")
                continue
            }
            guard let ft = type.type(of: field) else {
                if production {
                    throw CloudletError.invalid(
                        "field '\(field)' is not in the production schema of record type '\(query.recordType)'")
                }
                notes.append("field '\(field)' is not in the schema of '\(query.recordType)' (no record has it)")
                continue
            }
            if type.indexes[field, default: []].contains(flag) { continue }
            if production {
                throw CloudletError.invalid(
                    "Field '\(field)' is not marked \(flag.adjective) in the production schema of record type "
                        + "'\(query.recordType)'")
            }
            if let problem = IndexFlags.problem(flag, for: ft, system: SystemField(rawValue: field) != nil) {
                notes.append("field '\(field)' cannot be \(flag) (\(problem)); the query scans")
                continue
            }
            if !additions.contains(where: { $0 == (field, flag) }) { additions.append((field, flag)) }
        }
        if !additions.isEmpty {
            let list = additions.map { "\($0.flag) to '\($0.field)'" }.joined(separator: ", ")
            if addIndexes {
                let store = self.store, recordType = query.recordType, wanted = additions
                do {
                    try await ThreadBridge.offload {
                        try store.changeSchema { schema in
                            (try wanted.flatMap { try schema.indexAdditions(key, recordType: recordType, field: $0.field, $0.flag) }, ())
                        }
                    }
                    notes.append("development: added \(list) just in time")
                } catch let e as CloudletError where e.code == .readOnly {
                    notes.append("development: could not add \(list) (\(e.message)); the query scans")
                }
                schema = store.schemaSnapshot()
                type = schema.recordType(key, query.recordType) ?? type
            } else {
                notes.append("development: the query would add \(list) just in time")
            }
        }
        var needed: [String: Set<IndexKind>] = [:]
        for (field, flag) in requirements(query, type) {
            guard let ft = type.type(of: field), type.indexes[field, default: []].contains(flag) else { continue }
            needed[field, default: []].formUnion(IndexKind.kinds(for: flag, type: ft, field: field))
        }
        let searchable = Set(type.indexes.filter { $0.value.contains(.searchable) }.keys)
        var pq = PreparedQuery(
            query: query, schemaKey: key, order: SortOrder(descriptors: query.sortDescriptors), searchable: searchable,
            needed: needed, recordSchema: type)
        // Without sort descriptors, a token search ranks its matches (even terms whose field is unindexed, or not a
        // text field: they match nothing and score nothing, whatever the index's state — the order must not
        // depend on it, for markers to hold).
        if query.sortDescriptors.isEmpty, case let terms = RankTerm.of(query.predicate, searchable: searchable), !terms.isEmpty {
            pq.rankTerms = terms
            pq.order.ranked = true
        }
        return (pq, notes)
    }

    /// A query of `cloudkit.share`, the shares of a zone as records (docs/sharing.md, "Querying shares"). The type is
    /// no schema type (a share is not saved as a record) and has no index: the query reads the zone's share records by
    /// the type's record names (a zone has few) and may filter and sort by system fields only — the share's own
    /// members (participants, permissions) are not fields. The same in development and production.
    /// - Throws: `invalidArguments` for any other field, a full-text search, or a comparator no system field matches.
    private func prepareShareQuery(_ query: Query, _ key: SchemaKey) throws -> PreparedQuery {
        let systemFields = SystemField.allCases.map(\.rawValue).joined(separator: ", ")
        func systemField(_ f: String) throws -> SystemField {
            guard let field = SystemField(rawValue: f) else {
                throw CloudletError.invalid(
                    "records of type '\(Share.recordType)' are queried by their system fields (\(systemFields)), not by '\(f)'")
            }
            return field
        }
        for c in query.predicate.comparisons {
            if let needed = c.comparator.fieldNeeded(by: try systemField(c.field).type) {
                throw CloudletError.invalid(
                    "\(c.comparator.rawValue) cannot apply to system field '\(c.field)' of '\(Share.recordType)' (it needs \(needed))")
            }
        }
        for d in query.sortDescriptors {
            _ = try systemField(d.field)
            if d.relativeLocation != nil { throw CloudletError.invalid("a sort by distance needs a LOCATION field; '\(d.field)' is not one") }
        }
        return PreparedQuery(
            query: query, schemaKey: key, order: SortOrder(descriptors: query.sortDescriptors), searchable: [], needed: [:],
            recordSchema: RecordTypeSchema(name: Share.recordType))
    }

    /// The index flag each field of the query needs: its comparisons', its sorts', `recordName` QUERYABLE to list a
    /// type without filters (as CloudKit requires), and SEARCHABLE on the type's text fields for `self CONTAINS`.
    private func requirements(_ query: Query, _ type: RecordTypeSchema) -> [(String, IndexFlags)] {
        var out: [(String, IndexFlags)] = []
        let comparisons = query.predicate.comparisons
        if comparisons.isEmpty, case .all = query.predicate {
            out.append((SystemField.recordName.rawValue, .queryable))
        }
        for c in comparisons {
            if c.field == fullTextField {
                let searchable = type.indexes.filter { $0.value.contains(.searchable) }.keys
                if searchable.isEmpty {
                    // Every text field, so that development finds something to index (production then names one).
                    let text = type.fields.filter { $0.value.scalar == .string }.keys.sorted()
                    out += (text.isEmpty ? [fullTextField] : text).map { ($0, IndexFlags.searchable) }
                } else {
                    out += searchable.sorted().map { ($0, IndexFlags.searchable) }
                }
            } else {
                out.append((c.field, c.comparator.requiredFlag))
            }
        }
        for d in query.sortDescriptors { out.append((d.field, .sortable)) }
        return out
    }

    /// Rejects queries no schema could make sense of: bad names, NEAR without a location and distance, token
    /// searches without text, a comparator on a field of a type it cannot match (NEAR on an INT64), sorts by lists
    /// or by a location without a point.
    private func validateShape(_ query: Query) throws {
        try Names.validateIdentifier(query.recordType, what: "record type")
        let type = store.schemaSnapshot().recordType(SchemaKey(container: id.container, environment: id.environment), query.recordType)
        func checkField(_ f: String) throws {
            if f == fullTextField || SystemField(rawValue: f) != nil { return }
            try Names.validateIdentifier(f, what: "field name")
        }
        for c in query.predicate.comparisons {
            try checkField(c.field)
            switch c.comparator {
            case .near:
                guard case .location = c.value, let d = c.distance, d.isFinite, d >= 0 else {
                    throw CloudletError.invalid("NEAR on field '\(c.field)' needs a location value and a distance (km) ≥ 0")
                }
            case .containsAllTokens, .containsAnyTokens:
                guard c.value.stringValue != nil else {
                    throw CloudletError.invalid("\(c.comparator.rawValue) on field '\(c.field)' needs a string of words")
                }
            default:
                if c.field == fullTextField {
                    throw CloudletError.invalid(
                        "full-text search ('\(fullTextField)' / self) supports CONTAINS_ALL_TOKENS and CONTAINS_ANY_TOKENS, not \(c.comparator.rawValue)")
                }
            }
            if c.field != fullTextField, let ft = type?.type(of: c.field), let needed = c.comparator.fieldNeeded(by: ft) {
                throw CloudletError.invalid(
                    "\(c.comparator.rawValue) cannot apply to \(ft) field '\(c.field)' of record type '\(query.recordType)' "
                        + "(it needs \(needed))")
            }
        }
        for d in query.sortDescriptors {
            guard d.field != fullTextField else { throw CloudletError.invalid("cannot sort by '\(fullTextField)'") }
            try checkField(d.field)
            guard let ft = type?.type(of: d.field) else { continue }
            if ft.isList { throw CloudletError.invalid("cannot sort by field '\(d.field)': it is a \(ft)") }
            if ft.scalar == .asset { throw CloudletError.invalid("cannot sort by field '\(d.field)': it is an ASSETID") }
            if ft.scalar == .location && d.relativeLocation == nil {
                throw CloudletError.invalid("sorting by LOCATION field '\(d.field)' needs a relative location (sort by distance)")
            }
            if ft.scalar != .location && d.relativeLocation != nil {
                throw CloudletError.invalid("a sort by distance needs a LOCATION field; '\(d.field)' is a \(ft)")
            }
        }
    }
}
