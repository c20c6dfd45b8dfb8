import Cloudlet
import CloudletCore
import CloudletStorage
import Foundation

extension CloudletStore {
    /// Creates a custom zone if it does not exist (`cloudlet-tool import`); any database scope, the system
    /// container included.
    package func importZone(_ key: ZoneKey) async throws {
        try checkOpen()
        guard key.zoneName != ZoneID.defaultZoneName else { return }
        try Names.validateZoneName(key.zoneName)
        let p = partition(for: key)
        let (_, lsn) = try await p.commit(waitingForRoom: { st, _ in (st.zone(key) == nil ? [.createZone(key)] : [], ()) })
        if let lsn { try await p.waitDurable(lsn) }
    }

    /// Adds the record types and fields of `types` that the schema lacks; refuses (naming it) a field whose type
    /// differs from the one the schema has.
    package func importSchema(_ key: SchemaKey, types: [RecordTypeSchema]) async throws {
        try checkOpen()
        let (_, version) = try await catalog.commit(waitingForRoom: { st -> ([Mutation], Void) in
            var missing: [Mutation] = []
            for t in types {
                let known = st.schema.recordType(key, t.name)
                if known == nil { missing.append(.schemaField(key, recordType: t.name, field: nil, type: nil)) }
                for (field, type) in t.fields.sorted(by: { $0.key < $1.key }) {
                    if let existing = known?.fields[field] {
                        guard existing == type else {
                            throw CloudletError.invalid(
                                "field '\(field)' of record type '\(t.name)' is \(existing) in \(key.container) (\(key.environment.rawValue)), not \(type)")
                        }
                    } else {
                        missing.append(.schemaField(key, recordType: t.name, field: field, type: type))
                    }
                }
            }
            return (missing, ())
        })
        try await catalog.waitDurable(version)
    }

    /// Saves records into a zone as they are (`cloudlet-tool import`): created and modified stamps are kept, each
    /// record gets a new change tag (a tag from another store could collide with one of this store's versions).
    /// Names, field values and the schema are checked as for any save (development grows the schema, production
    /// refuses what it lacks); VALIDATE references are not, since a backup may list a record before its target.
    /// A record that exists is replaced; one of another type is refused. One commit per call.
    package func importRecords(_ records: [Record], into key: ZoneKey) async throws {
        try checkOpen()
        guard !records.isEmpty else { return }
        let p = partition(for: key)
        let exists = p.state.withLock { $0.zoneExists(key) }
        guard exists else { throw CloudletError(.zoneNotFound, "zone \(key.canonicalName) does not exist") }
        let schemaKey = SchemaKey(zone: key)
        for _ in 0..<8 {
            do {
                let (_, lsn) = try await p.commit(waitingForRoom: { [self] st, lsn -> ([Mutation], Void) in
                    var mutations: [Mutation] = []
                    var additions: [Mutation] = []
                    let snapshot = catalog.snapshot()
                    let schema = snapshot.schema
                    let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
                    for input in records {
                        try Names.validateRecordName(input.recordName)
                        try Names.validateIdentifier(input.recordType, what: "record type")
                        for (field, value) in input.fields {
                            try Names.validateIdentifier(field, what: "field name")
                            try value.validate(field: field)
                        }
                        if let e = try st.entry(key, input.recordName), !e.deleted, e.recordType != input.recordType {
                            throw CloudletError.invalid(
                                "record '\(input.recordName)' has type '\(e.recordType)'; it cannot be imported as '\(input.recordType)'")
                        }
                        var r = Record(recordType: input.recordType, id: RecordID(recordName: input.recordName, zoneID: key.zoneID))
                        r.fields = input.fields
                        let stamp = RecordStamp(timestamp: now, userRecordName: "_import", deviceID: configuration.deviceID)
                        r.created = input.created ?? input.modified ?? stamp
                        r.modified = input.modified ?? r.created
                        additions += try schema.additions(for: r, in: schemaKey, pending: additions)
                        r.changeTag = ChangeTag.make(lsn: lsn, index: mutations.count)
                        let encoded = RecordCodec.encode(r)
                        guard encoded.count <= BatchPlanner.maxRecordSize else {
                            throw CloudletError(.limitExceeded, "record '\(r.recordName)' is \(encoded.count) bytes; the limit is \(BatchPlanner.maxRecordSize)")
                        }
                        mutations.append(.putRecord(zone: key, record: r, encoded: encoded))
                    }
                    // Schema additions go to the catalog first, outside this lock (Catalog/).
                    guard additions.isEmpty else { throw BatchPlanner.NeedsSchema(mutations: additions) }
                    if snapshot.version > st.catalogVersion { mutations.append(.catalogVersion(snapshot.version)) }
                    return (mutations, ())
                })
                if let lsn { try await p.waitDurable(lsn) }
                return
            } catch let needs as BatchPlanner.NeedsSchema {
                try await addSchema(needs.mutations)
            }
        }
        throw CloudletError(.internalError, "the schema of zone \(key.canonicalName) kept changing during the import")
    }
}
