import CloudletCore

extension CloudletStore {
    /// At open: brings every partition's index definitions in line with the schema (a crash may have come between
    /// a schema change and the other partitions' definitions) and starts building the incomplete ones.
    func openIndexes() throws {
        if !configuration.readOnly { try reconcileIndexes() }
        startIndexBuilds()
    }

    /// Commits a schema change to partition 0, with the index definitions and drops it implies there, then to
    /// every other partition the definitions and drops that bring it in line, and starts the builds. `plan` runs
    /// under partition 0's writer lock with its schema. Blocking.
    @discardableResult
    func changeSchema<R>(_ plan: (SchemaCatalog) throws -> (mutations: [Mutation], result: R)) throws -> R {
        let p0 = partitions[0]
        let (result, lsn) = try p0.commit { st, _ -> ([Mutation], R) in
            let (mutations, result) = try plan(st.schema)
            guard !mutations.isEmpty else { return ([], result) }
            var after = st.schema
            for m in mutations { after.apply(m) }
            return (mutations + IndexReconciler.mutations(schema: after, indexes: st.indexes), result)
        }
        if let lsn { try p0.log.waitDurableBlocking(lsn) }
        try reconcileIndexes()
        startIndexBuilds()
        return result
    }

    /// Defines and drops indexes in each partition so that they match the schema. Each partition reads partition
    /// 0's schema under its own writer lock (lock order: a partition, then partition 0 — nothing takes them the
    /// other way round), so concurrent schema changes reconcile to the latest schema. Blocking.
    func reconcileIndexes() throws {
        for p in partitions {
            let (_, lsn) = try p.commit { st, _ -> ([Mutation], Void) in
                let schema = p.id == 0 ? st.schema : schemaSnapshot()
                return (IndexReconciler.mutations(schema: schema, indexes: st.indexes), ())
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
