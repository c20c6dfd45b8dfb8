extension Container {
    /// The fields of `environment`'s schema whose indexes are still being built over the records saved before they
    /// were defined (queries on them work meanwhile, filtering what the build has not reached), as
    /// `(recordType, field)` pairs sorted by type and field; empty once every build has finished. A composite index
    /// is reported by its name. The console's schema page shows ``indexBuilds(environment:)``, which adds their progress.
    public func indexesBuilding(environment: Environment = .development) -> [(recordType: String, field: String)] {
        indexBuilds(environment: environment).map { ($0.recordType, $0.field) }
    }
}

/// An index being built over the records saved before it was defined (``Container/indexBuilds(environment:)``).
public struct IndexBuildStatus: Sendable, Hashable {
    public var recordType: String
    /// The field (a composite index: its name).
    public var field: String
    /// Records of the type the build has gone through, in the partitions being built now.
    public var recordsDone: Int
    /// Records of the type there were when those builds started; nil while every build of it is still queued.
    public var recordsTotal: Int?

    /// `recordsDone` of `recordsTotal`, 0…1; nil while queued.
    public var fractionDone: Double? {
        guard let total = recordsTotal else { return nil }
        return total == 0 ? 1 : Double(recordsDone) / Double(total)
    }
}

extension Container {
    /// ``indexesBuilding(environment:)`` with each build's progress: the record names its builds have walked of
    /// those there were when they started, summed over the partitions being built now (builds run one at a time,
    /// so in a store of several partitions the figures are of the partition at hand).
    public func indexBuilds(environment: Environment = .development) -> [IndexBuildStatus] {
        let schema = SchemaKey(container: identifier, environment: environment)
        var found: [[String]: IndexBuildStatus] = [:]
        for p in store.partitions {
            for (d, _) in p.state.withLock({ $0.indexes.building }) where d.schema == schema {
                let key = [d.recordType, d.field]
                var status = found[key] ?? IndexBuildStatus(recordType: d.recordType, field: d.field, recordsDone: 0, recordsTotal: nil)
                if let progress = store.indexBuilder.progress(IndexBuilder.Job(partition: p.id, type: d.typeKey)) {
                    status.recordsDone += progress.done
                    status.recordsTotal = (status.recordsTotal ?? 0) + progress.total
                }
                found[key] = status
            }
        }
        return found.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { found[$0]! }
    }
}
