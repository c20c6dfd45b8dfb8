import CloudletCore
import CloudletStorage

/// What the catalog holds: every container's schemas (record types, field types, index flags — the indexes'
/// declared state) and every subscription, as of a catalog version. Security roles, shares and keys are to come
/// here too, each as a section of its own (see ``encodeCheckpoint()``).
///
/// A value: the catalog hands out copies as snapshots (``Catalog/snapshot()``), which never change under a reader.
/// Changed only by ``apply(_:lsn:position:)``, the one code path for replay and live commits.
package struct CatalogState: Sendable {
    package init() {}

    /// The catalog version: the LSN of the last catalog commit applied (0: none yet).
    package var version: UInt64 = 0
    /// Where the frame after `version` starts (the replay start of a checkpoint taken now).
    package var nextPosition: FramePosition?
    package var schema = SchemaCatalog()
    /// Subscriptions by subscriber and ID.
    package var subscriptions: [SubscriberID: [String: Subscription]] = [:]
    /// Security roles, grants and role members.
    package var security = SecurityCatalog()
    /// Shares and who may see which shared zone.
    package var shares = ShareCatalog()

    /// Whether there is nothing in it (a format-1 store whose partition 0 held no catalog has nothing to migrate).
    package var isEmpty: Bool { schema.types.isEmpty && subscriptions.isEmpty && security.isEmpty && shares.isEmpty }

    /// Applies a catalog commit (``check(_:)`` has accepted it) at `lsn`.
    package mutating func apply(_ commit: Commit, lsn: UInt64, position: FramePosition?) {
        for m in commit.mutations { apply(m, version: lsn) }
        version = lsn
        nextPosition = position?.next
    }

    /// Applies one catalog mutation (also how partition 0 of a format-1 store gathers its catalog on replay).
    /// `version`: the catalog commit's (0 where unknown: the access events of shares keep it, for the shared
    /// database's change feed).
    package mutating func apply(_ m: Mutation, version: UInt64 = 0) {
        switch m {
        case .schemaReset(let container):
            schema.apply(m)
            security.reset(container: container)
        case .schemaField, .index(.flags), .index(.composite): schema.apply(m)
        case .saveSubscription(let who, let sub): subscriptions[who, default: [:]][sub.id] = sub
        case .deleteSubscription(let who, let id):
            subscriptions[who]?[id] = nil
            if subscriptions[who]?.isEmpty == true { subscriptions[who] = nil }
        case .security(.share(let change)): shares.apply(change, version: version)
        case .security(let change): security.apply(change)
        case .putRecord, .deleteRecord, .createZone, .deleteZone, .purge, .index, .catalogVersion: break
        }
    }

    /// Throws `.corruption` unless `commit` is a catalog commit: catalog mutations only, no zone.
    package static func check(_ commit: Commit) throws {
        for m in commit.mutations where !m.isCatalogMutation {
            throw CloudletError.corruption("catalog commit: holds a data mutation (\(m.kindName))")
        }
    }

    /// The subscriptions of one subscriber.
    package func subscriptions(of who: SubscriberID) -> [String: Subscription] { subscriptions[who] ?? [:] }
}

extension SubscriberID {
    /// Orders subscribers the same way everywhere (checkpoints, dumps, hashes).
    package var sortKey: String {
        [database.container, database.environment.rawValue, database.scope.rawValue, database.owner, user].joined(separator: "\u{0}")
    }
}

extension Mutation {
    /// Whether the mutation belongs in the catalog's log: schema fields and resets, index flags, subscriptions.
    package var isCatalogMutation: Bool {
        switch self {
        case .schemaField, .schemaReset, .index(.flags), .index(.composite), .saveSubscription, .deleteSubscription, .security:
            true
        case .putRecord, .deleteRecord, .createZone, .deleteZone, .purge, .index, .catalogVersion: false
        }
    }

    /// A short name of the mutation's kind, for messages.
    package var kindName: String {
        switch self {
        case .putRecord: "put record"
        case .deleteRecord: "delete record"
        case .createZone: "create zone"
        case .deleteZone: "delete zone"
        case .schemaField: "schema field"
        case .schemaReset: "schema reset"
        case .purge: "purge"
        case .index(.flags): "index flags"
        case .index(.composite): "composite index"
        case .index: "index definition"
        case .saveSubscription: "save subscription"
        case .deleteSubscription: "delete subscription"
        case .catalogVersion: "catalog version"
        case .security: "security roles"
        }
    }
}

// MARK: - Checkpoint

/// Checkpoint encoding of the catalog (docs/record-format.md, "Catalog").
extension CatalogState {
    package static let checkpointVersion: UInt8 = 1

    /// Section tags: each section is `tag u8 · length varint · body`, so that later ones (roles, shares, keys) can
    /// be added without changing the others.
    package enum Section: UInt8 {
        case schema = 1
        case subscriptions = 2
        /// Composite indexes: written only when some type declares one, so that a catalog without any reads as
        /// before.
        case compositeIndexes = 3
        /// Security roles (``SecurityCatalog``): written only when there are some.
        case security = 4
        /// Shares (``ShareCatalog``): written only when there are some.
        case shares = 5
    }

    package func encodeCheckpoint() -> [UInt8] {
        var w = ByteWriter(capacity: 4096)
        w.u8(Self.checkpointVersion)
        w.u64(version)
        let composites = schema.encodeComposites()
        w.varint(2 + (composites == nil ? 0 : 1) + (security.isEmpty ? 0 : 1) + (shares.isEmpty ? 0 : 1))
        var schemaBody = ByteWriter(capacity: 1024)
        schema.encode(into: &schemaBody)
        w.u8(Section.schema.rawValue)
        w.bytes(schemaBody.bytes)
        var subs = ByteWriter(capacity: 1024)
        subs.varint(subscriptions.count)
        for (who, byID) in subscriptions.sorted(by: { $0.key.sortKey < $1.key.sortKey }) {
            who.encode(into: &subs)
            subs.varint(byID.count)
            for s in byID.values.sorted(by: { $0.id < $1.id }) { Subscription.encode(s, into: &subs) }
        }
        w.u8(Section.subscriptions.rawValue)
        w.bytes(subs.bytes)
        if let composites {
            w.u8(Section.compositeIndexes.rawValue)
            w.bytes(composites)
        }
        if !security.isEmpty {
            var body = ByteWriter(capacity: 256)
            security.encode(into: &body)
            w.u8(Section.security.rawValue)
            w.bytes(body.bytes)
        }
        if !shares.isEmpty {
            var body = ByteWriter(capacity: 256)
            shares.encode(into: &body)
            w.u8(Section.shares.rawValue)
            w.bytes(body.bytes)
        }
        return w.bytes
    }

    /// Decodes what ``encodeCheckpoint()`` wrote. A section this build does not know is refused (`notSupported`):
    /// opening would lose it.
    package static func decodeCheckpoint(_ bytes: [UInt8], next: FramePosition?) throws -> CatalogState {
        var r = ByteReader(bytes, what: "catalog checkpoint")
        let v = try r.u8()
        guard v == checkpointVersion else {
            throw CloudletError(.notSupported, "catalog checkpoint: version \(v) is not supported (this build reads \(checkpointVersion))")
        }
        var s = CatalogState()
        s.version = try r.u64()
        s.nextPosition = next
        let sections = try r.length()
        for _ in 0..<sections {
            let tag = try r.u8()
            let body = try r.bytes()
            var b = ByteReader(body, what: "catalog checkpoint section \(tag)")
            switch Section(rawValue: tag) {
            case .schema: s.schema = try SchemaCatalog.decode(&b)
            case .compositeIndexes: try s.schema.decodeComposites(&b)
            case .security: s.security = try SecurityCatalog.decode(&b)
            case .shares: s.shares = try ShareCatalog.decode(&b)
            case .subscriptions:
                let subscribers = try b.length()
                for _ in 0..<subscribers {
                    let who = try SubscriberID.decode(&b)
                    let n = try b.length()
                    for _ in 0..<n {
                        let sub = try Subscription.decode(&b)
                        s.subscriptions[who, default: [:]][sub.id] = sub
                    }
                }
            case nil:
                throw CloudletError(.notSupported, "catalog checkpoint: section \(tag) is not known to this build")
            }
            guard b.isAtEnd else { throw CloudletError.corruption("catalog checkpoint section \(tag): \(b.remaining) trailing bytes") }
        }
        guard r.isAtEnd else { throw CloudletError.corruption("catalog checkpoint: \(r.remaining) trailing bytes") }
        return s
    }
}

extension SchemaCatalog {
    /// `count varint · per (container, environment): container string · environment u8 · type count varint · per
    /// type: name string · field count varint · (name string · type tag u8)… · index count varint · (field string ·
    /// flags u8)…`, sorted so that equal catalogs encode alike.
    package func encode(into w: inout ByteWriter) {
        let keys = types.keys.sorted(by: SchemaKey.inOrder)
        w.varint(keys.count)
        for key in keys {
            let byName = types[key]!
            w.string(key.container)
            w.u8(key.environment == .production ? 1 : 0)
            w.varint(byName.count)
            for name in byName.keys.sorted() {
                let t = byName[name]!
                w.string(name)
                w.varint(t.fields.count)
                for field in t.fields.keys.sorted() {
                    w.string(field)
                    w.u8(t.fields[field]!.tag)
                }
                w.varint(t.indexes.count)
                for field in t.indexes.keys.sorted() {
                    w.string(field)
                    w.u8(t.indexes[field]!.rawValue)
                }
            }
        }
    }

    /// The composite indexes section: `count varint · per declaring type: container string · environment u8 · type
    /// string · index count varint · (name string · components)…` (components as ``IndexMutation`` encodes them);
    /// nil when no type declares one.
    package func encodeComposites() -> [UInt8]? {
        var declaring: [(SchemaKey, String, [CompositeIndex])] = []
        let keys = types.keys.sorted(by: SchemaKey.inOrder)
        for key in keys {
            for name in types[key]!.keys.sorted() where !types[key]![name]!.composites.isEmpty {
                declaring.append((key, name, types[key]![name]!.composites.values.sorted { $0.name < $1.name }))
            }
        }
        guard !declaring.isEmpty else { return nil }
        var w = ByteWriter(capacity: 256)
        w.varint(declaring.count)
        for (key, type, indexes) in declaring {
            IndexMutation.encode(key, into: &w)
            w.string(type)
            w.varint(indexes.count)
            for c in indexes {
                w.string(c.name)
                IndexMutation.encode(c.components, into: &w)
            }
        }
        return w.bytes
    }

    /// Reads the composite indexes section (after the schema section, which declares their types).
    mutating func decodeComposites(_ r: inout ByteReader) throws {
        for _ in 0..<(try r.length()) {
            let key = try IndexMutation.decodeSchemaKey(&r)
            let type = try r.string()
            guard types[key]?[type] != nil else {
                throw CloudletError.corruption("catalog checkpoint: composite indexes of record type '\(type)', which the schema lacks")
            }
            for _ in 0..<(try r.length()) {
                let name = try r.string()
                types[key]![type]!.composites[name] = CompositeIndex(name: name, components: try IndexMutation.decodeComponents(&r))
            }
        }
    }

    package static func decode(_ r: inout ByteReader) throws -> SchemaCatalog {
        var out = SchemaCatalog()
        let count = try r.length()
        for _ in 0..<count {
            let key = try IndexMutation.decodeSchemaKey(&r)
            let typeCount = try r.length()
            var types: [String: RecordTypeSchema] = [:]
            for _ in 0..<typeCount {
                var t = RecordTypeSchema(name: try r.string())
                let fields = try r.length()
                for _ in 0..<fields {
                    let field = try r.string()
                    let tag = try r.u8()
                    guard let ft = FieldType(tag: tag) else { throw CloudletError.corruption("catalog checkpoint: bad field type \(tag)") }
                    t.fields[field] = ft
                }
                let indexed = try r.length()
                for _ in 0..<indexed {
                    let field = try r.string()
                    let flags = IndexFlags(rawValue: try r.u8())
                    guard flags.rawValue & ~0x07 == 0 else {
                        throw CloudletError.corruption("catalog checkpoint: bad index flags \(flags.rawValue)")
                    }
                    t.indexes[field] = flags
                }
                types[t.name] = t
            }
            out.types[key] = types
        }
        return out
    }
}
