import CloudletCore

extension CloudletStore {
    /// At open: brings every partition's index definitions in line with the schema (a crash may have come between
    /// a schema change and the other partitions' definitions) and starts building the incomplete ones.
    func openIndexes() throws {
        if !configuration.readOnly { try reconcileIndexes() }
        startIndexBuilds()
    }

    /// Commits a schema change to the catalog and waits until it is durable, then commits to every partition the
    /// index definitions and drops that bring it in line, and starts the builds. `plan` runs under the catalog's
    /// writer lock with the newest schema. Blocking.
    @discardableResult
    func changeSchema<R>(_ plan: (SchemaCatalog) throws -> (mutations: [Mutation], result: R)) throws -> R {
        try changeCatalog { st in try plan(st.schema) }
    }

    /// ``changeSchema(_:)`` for a plan that also reads the rest of the catalog (security roles).
    func changeCatalog<R>(_ plan: (CatalogState) throws -> (mutations: [Mutation], result: R)) throws -> R {
        let (result, version) = try catalog.commit { st in try plan(st) }
        try catalog.waitDurableBlocking(version)
        try reconcileIndexes()
        startIndexBuilds()
        return result
    }

    /// Defines and drops indexes in each partition so that they match the catalog's schema. Each partition reads
    /// a catalog snapshot under its own writer lock (which never waits for the catalog), so concurrent schema
    /// changes reconcile to the latest durable schema; the commit records the catalog version it used. Blocking.
    func reconcileIndexes() throws {
        for p in partitions {
            let (_, lsn) = try p.commit { st, _ -> ([Mutation], Void) in
                let snapshot = catalog.snapshot()
                var mutations = IndexReconciler.mutations(schema: snapshot.schema, indexes: st.indexes)
                if !mutations.isEmpty && snapshot.version > st.catalogVersion {
                    mutations.append(.catalogVersion(snapshot.version))
                }
                return (mutations, ())
            }
            if let lsn { try p.log.waitDurableBlocking(lsn) }
        }
    }

    func startIndexBuilds() {
        for p in partitions { indexBuilder.enqueueBuilding(p) }
    }

    /// Waits until every index build started so far has finished (indexes added to a schema that already has
    /// records are built in the background; until then queries scan in development and get `serviceUnavailable`
    /// in production).
    public func waitForIndexBuilds() async {
        await indexBuilder.waitUntilIdle()
    }
}
