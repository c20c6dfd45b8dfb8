extension Container {
    /// The fields of `environment`'s schema whose indexes are still being built over the records saved before they
    /// were defined (queries on them work meanwhile, filtering what the build has not reached), as
    /// `(recordType, field)` pairs sorted by type and field; empty once every build has finished. A composite index
    /// is reported by its name. For the console's schema page.
    public func indexesBuilding(environment: Environment = .development) -> [(recordType: String, field: String)] {
        let schema = SchemaKey(container: identifier, environment: environment)
        var found = Set<[String]>()
        for p in store.partitions {
            for (d, _) in p.state.withLock({ $0.indexes.building }) where d.schema == schema {
                found.insert([d.recordType, d.field])
            }
        }
        return found.sorted { $0.lexicographicallyPrecedes($1) }.map { ($0[0], $0[1]) }
    }
}
