import CloudletCore
import CloudletStorage

extension PartitionState {
    /// The secondary indexes defined, with their ids (for comparing two derivations of a state).
    package var indexDefinitions: [String: UInt32] {
        Dictionary(uniqueKeysWithValues: indexes.definitions.map { ("\($0.key)", $0.value.id) })
    }

    /// What is wrong with the values stored for record `r` of zone `z` (``StoredValues``, what its index keys are
    /// derived from): a stored field whose value is not the record's. Nil when they agree (or none are stored).
    package func storedValuesProblem(_ z: ZoneKey, _ r: Record) throws -> String? {
        guard let values = try IndexState.storedValues(keys, DirectoryKey.zone(z), r.recordType, r.recordName) else { return nil }
        for field in values.keys.sorted() where values[field]! != IndexedField.value(field, in: r) {
            let stored = values[field]!.map { "\($0)" } ?? "nothing"
            let actual = IndexedField.value(field, in: r).map { "\($0)" } ?? "nothing"
            return "zone \(z): the stored index value of field '\(field)' of record '\(r.recordName)' is \(stored), the record has \(actual)"
        }
        return nil
    }

    /// What is inconsistent in the secondary indexes' key ranges (`cloudlet-tool verify --deep`): stored values of a
    /// record that is not live at that type, an index key its record's stored values do not call for (or the
    /// reverse), a record of a ready index's type without a stored value for the field, a type's record count that is
    /// not its type index's. Reads every index key and stored value (point lookups for the cross checks); at most
    /// `limit` problems are returned.
    package func secondaryIndexProblems(limit: Int = 50) throws -> [String] {
        var problems: [String] = []
        func problem(_ s: String) -> Bool {
            problems.append(s)
            return problems.count < limit
        }
        for z in keys.zoneKeys.sorted(by: { "\($0)" < "\($1)" }) {
            let zone = DirectoryKey.zone(z)
            let zoneName = "zone \(z)"
            let schema = SchemaKey(zone: z)
            let defs = indexes.definitions.filter { $0.key.schema == schema }
            // Records by type, from the type index: the counts, and ready indexes' completeness.
            let typeTag = zone + [DirectoryKey.typeTag]
            var types = keys.indexCursor(LSMKeyRange(lower: typeTag, upper: DirectoryKey.successor(typeTag)))
            var counts: [String: Int] = [:]
            while let e = try types.next() {
                let (type, name) = try DirectoryKey.typeAndName(e.key, zoneCount: zone.count)
                counts[type, default: 0] += 1
                let ready = defs.filter { $0.key.recordType == type && $0.value.status == .ready }
                guard !ready.isEmpty else { continue }
                let values = try IndexState.storedValues(keys, zone, type, name)
                for (d, _) in ready where d.valueKeys(values, name: name) == nil {
                    guard problem("\(zoneName): record '\(name)' has no stored value for the ready \(d)") else { return problems }
                }
            }
            for type in Set(counts.keys).union(indexes.recordCounts[z]?.keys ?? [:].keys) where counts[type] ?? 0 != indexes.recordCount(z, type) {
                guard problem("\(zoneName): \(indexes.recordCount(z, type)) records of '\(type)' counted, the type index holds \(counts[type] ?? 0)") else { return problems }
            }
            // Every stored value's keys are there, and it belongs to a live record of its type.
            let valuesTag = zone + [IndexKeyspace.valuesTag]
            var stored = keys.indexCursor(LSMKeyRange(lower: valuesTag, upper: DirectoryKey.successor(valuesTag)))
            while let e = try stored.next() {
                let (type, name) = try DirectoryKey.typeAndName([DirectoryKey.typeTag] + e.key[(zone.count + 1)...], zoneCount: 0)
                guard let entry = try keys.entry(z, name), !entry.deleted, entry.recordType == type else {
                    guard problem("\(zoneName): stored index values of '\(name)', which is not a live record of '\(type)'") else { return problems }
                    continue
                }
                let values = try StoredValues.decode(e.value)
                for (d, info) in defs where d.recordType == type {
                    guard let filed = d.valueKeys(values, name: name) else { continue }
                    let subspace = IndexKeyspace.Subspace(zone: zone, id: info.id)
                    for k in filed where try keys.indexValue(subspace.key(k, name)) == nil {
                        guard problem("\(zoneName): the \(d) lacks record '\(name)' under \(LSMKey.printable(k))") else { return problems }
                    }
                }
            }
            // Every index key is called for by its record's stored value; a full-text key holds the posting the value
            // gives, and the index's totals are its records'.
            for (d, info) in defs {
                let subspace = IndexKeyspace.Subspace(zone: zone, id: info.id)
                var c = d.maintainer.scan(keys, subspace, .all)
                var totals = TextTotals()
                while let (e, value) = try c.nextWithValue() {
                    let values = try IndexState.storedValues(keys, zone, d.recordType, e.name)
                    let filed = d.valueKeys(values, name: e.name)
                    guard filed?.contains(e.valueKey) == true else {
                        guard problem("\(zoneName): the \(d) files '\(e.name)' under \(LSMKey.printable(e.valueKey)), which its stored values do not") else { return problems }
                        continue
                    }
                    if d.kind == .spatial {
                        // A key's location (written since the value existed; empty before) is its record's.
                        let want = SpatialMaintainer.entryValue(values?[d.field] ?? nil)
                        if !value.isEmpty && !value.elementsEqual(want) {
                            guard problem("\(zoneName): the \(d)'s key of '\(e.name)' under \(LSMKey.printable(e.valueKey)) holds location \(LSMKey.printable(value)), its stored value gives \(LSMKey.printable(want))") else { return problems }
                        }
                        continue
                    }
                    guard d.kind == .text else { continue }
                    let doc = TextDocument(values?[d.field] ?? nil)
                    let token = String(decoding: e.valueKey, as: UTF8.self)
                    if try TextPosting.decode(value) != doc.posting(token) {
                        let want = doc.posting(token).map { "\($0.frequency) of \($0.length)" } ?? "none"
                        guard problem("\(zoneName): the \(d)'s posting of '\(e.name)' under '\(token)' is \(LSMKey.printable(value)), its stored value gives \(want)") else { return problems }
                    }
                    // Each record once: under its probe token.
                    if doc.probe == token { totals.add(doc, 1) }
                }
                if d.kind == .text, let kept = indexes.textTotals(d, zone: z), kept != totals {
                    guard problem("\(zoneName): the \(d) counts \(kept.documents) records of \(kept.tokens) tokens, its keys hold \(totals.documents) of \(totals.tokens)") else { return problems }
                }
            }
        }
        return problems
    }
}
