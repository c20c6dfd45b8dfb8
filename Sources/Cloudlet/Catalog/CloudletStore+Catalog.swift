import CloudletCore
import CloudletStorage

/// What opening a format-1 store did to it: its catalog (schemas, index flags, subscriptions), which partition 0's
/// log held, was committed to the catalog's own log, then the metadata was set to format 2.
package struct CatalogMigration: Sendable, CustomStringConvertible {
    package var fromFormat: Int
    package var toFormat: Int
    package var recordTypes = 0
    package var fields = 0
    package var indexFlags = 0
    package var subscriptions = 0
    /// The catalog version the migration's commit got (0: there was nothing to move).
    package var catalogVersion: UInt64 = 0
    /// The catalog already held the migration's commit: an earlier open was interrupted before the metadata said
    /// format 2.
    package var resumed = false

    package var description: String {
        let what =
            "\(recordTypes) record type(s), \(fields) field(s), \(indexFlags) index flag setting(s) and \(subscriptions) subscription(s)"
        if resumed {
            return "finished migrating the store from format \(fromFormat) to \(toFormat): the catalog already held the "
                + "migrated catalog (version \(catalogVersion)) from an interrupted open"
        }
        if catalogVersion == 0 {
            return "migrated the store from format \(fromFormat) to \(toFormat): partition 0 held no schema or subscription to move"
        }
        return "migrated the store from format \(fromFormat) to \(toFormat): moved \(what) out of partition 0 into the "
            + "catalog's log (\(Catalog.directoryName)/, one commit, catalog version \(catalogVersion))"
    }
}

extension CatalogState {
    /// The catalog commit that recreates this state in an empty catalog: every type, field, index flag setting and
    /// subscription, in a stable order.
    package func migrationMutations() -> (mutations: [Mutation], migration: CatalogMigration) {
        var out: [Mutation] = []
        var m = CatalogMigration(fromFormat: StoreMetadata.partitionZeroCatalogFormat, toFormat: StoreMetadata.currentFormat)
        let keys = schema.types.keys.sorted(by: SchemaKey.inOrder)
        for key in keys {
            let types = schema.types[key]!
            for name in types.keys.sorted() {
                let t = types[name]!
                out.append(.schemaField(key, recordType: name, field: nil, type: nil))
                m.recordTypes += 1
                for field in t.fields.keys.sorted() {
                    out.append(.schemaField(key, recordType: name, field: field, type: t.fields[field]!))
                    m.fields += 1
                }
                for field in t.indexes.keys.sorted() where !t.indexes[field]!.isEmpty {
                    out.append(.index(.flags(key, recordType: name, field: field, t.indexes[field]!)))
                    m.indexFlags += 1
                }
            }
        }
        for who in subscriptions.keys.sorted(by: { $0.sortKey < $1.sortKey }) {
            for sub in subscriptions[who]!.values.sorted(by: { $0.id < $1.id }) {
                out.append(.saveSubscription(who, sub))
                m.subscriptions += 1
            }
        }
        return (out, m)
    }
}

extension CloudletStore {
    /// Opens the catalog of a store whose partitions are open.
    ///
    /// Format 2: the catalog in `DIR/catalog/`; every partition's recorded catalog version must be one the catalog
    /// has (else `.corruption`: the catalog lost commits that data depends on). Format 1 read-only: the catalog
    /// partition 0's replay gathered, in memory. Format 1 read-write: the **migration** — that catalog is committed
    /// to the new catalog log as one commit (unless an interrupted migration already did), made durable, then the
    /// metadata is rewritten as format 2 and the migration is reported on standard error, once.
    package static func openCatalog(
        path: String, metadata: StoreMetadata, partitions: [Partition], configuration: StoreConfiguration,
        fileSystem: any FileSystem, backgroundErrors: BackgroundErrors
    ) throws -> (Catalog, StoreMetadata, CatalogMigration?) {
        let directory = path + "/" + Catalog.directoryName
        var metadata = metadata
        var migration: CatalogMigration?
        if metadata.format == StoreMetadata.partitionZeroCatalogFormat {
            if configuration.readOnly {
                return (Catalog(legacy: partitions[0].state.withLock { $0.legacyCatalog } ?? CatalogState()), metadata, nil)
            }
            (metadata, migration) = try migrate(
                path: path, metadata: metadata, partitions: partitions, directory: directory, configuration: configuration,
                fileSystem: fileSystem, backgroundErrors: backgroundErrors)
        }
        if configuration.readOnly && !fileSystem.fileExists(directory) {
            throw CloudletError.corruption(
                "store \(path) is of format \(metadata.format) but its catalog directory \(directory) is missing")
        }
        let catalog = try Catalog(
            directory: directory, configuration: configuration, fileSystem: fileSystem, backgroundErrors: backgroundErrors)
        do {
            if !configuration.replicated { try checkCatalogVersions(partitions, catalog: catalog, directory: directory) }
            if !configuration.readOnly && metadata.format < StoreMetadata.currentFormat {
                // Before the first commit that could hold a record block; after every partition wrote its index.
                let from = metadata.format
                metadata.format = StoreMetadata.currentFormat
                try metadata.save(directory: path)
                var what: [String] = []
                if from < StoreMetadata.recordBlockFormat {
                    what.append(
                        "new commits store each record as a record block read in place; older commits are read as they "
                            + "are, and converted when compaction rewrites their frames")
                }
                if from < StoreMetadata.indexLayerFormat {
                    what.append("each partition's key directory moved from checkpoints to its index on disk (p*/index)")
                }
                what.append(
                    "new key-directory entries keep the record's creation stamp (older ones are read as they are)")
                StoreLog.note("\(path): migrated the store from format \(from) to \(metadata.format): " + what.joined(separator: "; "))
            }
        } catch {
            catalog.abandon()
            throw error
        }
        return (catalog, metadata, migration)
    }

    /// Moves the catalog partition 0 of a format-1 store gathered into the catalog's log (one commit, fdatasync'd
    /// whatever the store's durability: the metadata that follows is, and must never name a catalog that a power
    /// cut could lose), then rewrites the metadata as format 2. Resumes an interrupted migration: only a migration
    /// writes to the catalog of a format-1 store, so a catalog that is not empty holds its commit.
    private static func migrate(
        path: String, metadata: StoreMetadata, partitions: [Partition], directory: String,
        configuration: StoreConfiguration, fileSystem: any FileSystem, backgroundErrors: BackgroundErrors
    ) throws -> (StoreMetadata, CatalogMigration) {
        let legacy = partitions[0].state.withLock { $0.legacyCatalog } ?? CatalogState()
        let (mutations, found) = legacy.migrationMutations()
        var migration = found
        var synced = configuration
        synced.durability = .fsync
        let catalog = try Catalog(
            directory: directory, configuration: synced, fileSystem: fileSystem, backgroundErrors: backgroundErrors)
        do {
            let existing = catalog.snapshot().version
            if existing > 0 {
                migration.resumed = true
                migration.catalogVersion = existing
            } else if !mutations.isEmpty {
                let (_, version) = try catalog.commit { _ in (mutations, ()) }
                try catalog.waitDurableBlocking(version)
                migration.catalogVersion = version
            }
            try catalog.close(checkpoint: true)
        } catch {
            catalog.abandon()
            throw error
        }
        var migrated = metadata
        migrated.format = StoreMetadata.currentFormat
        try migrated.save(directory: path, fileSystem: fileSystem)
        partitions[0].state.withLock { $0.legacyCatalog = nil }
        StoreLog.note("\(path): \(migration)")
        return (migrated, migration)
    }

    /// Refuses partitions whose commits were validated against a catalog version the catalog does not have.
    private static func checkCatalogVersions(_ partitions: [Partition], catalog: Catalog, directory: String) throws {
        let version = catalog.snapshot().version
        for p in partitions {
            let used = p.state.withLock { $0.catalogVersion }
            guard used <= version else {
                throw CloudletError.corruption(
                    "partition \(p.id) holds commits validated against catalog version \(used), but the catalog in "
                        + "\(directory) ends at version \(version): catalog commits were lost")
            }
        }
    }

    /// Commits the schema additions a data commit needs (those still missing: another writer may have added them
    /// meanwhile) and waits until they are durable, so that the next ``Catalog/snapshot()`` has them. Runs before
    /// any partition's lock is taken. Returns the catalog version to plan against.
    @discardableResult
    package func addSchema(_ additions: [Mutation]) async throws -> UInt64 {
        let (_, version) = try await catalog.commit(waitingForRoom: { st in (Self.missing(additions, in: st.schema), ()) })
        try await catalog.waitDurable(version)
        return version
    }

    /// The `.schemaField` additions the schema does not have yet.
    package static func missing(_ additions: [Mutation], in schema: SchemaCatalog) -> [Mutation] {
        var out: [Mutation] = []
        var after = schema
        for case .schemaField(let k, let type, let field, let ft) in additions {
            let known = after.recordType(k, type)
            if known == nil && field == nil || field.map({ known?.fields[$0] == nil }) == true {
                let m = Mutation.schemaField(k, recordType: type, field: field, type: ft)
                out.append(m)
                after.apply(m)
            }
        }
        return out
    }
}
