import CloudletConcurrency
import CloudletCore

extension Database {
    /// The bytes this database's live records take, as their stored sizes (what a response's byte budget counts,
    /// ``RecordEntry/pageCost(_:)``): what a storage quota is measured in. Walks the key directory of every zone of
    /// the database (off the cooperative pool), so it costs one pass over the database's records.
    public func storageUsed() async throws -> Int {
        try authorize(.read)
        var total = 0
        for p in store.partitions {
            let view = p.state.withLock { $0.directoryView }
            let id = self.id
            total += try await ThreadBridge.offload { () throws -> Int in
                var bytes = 0
                for key in view.zoneKeys(of: id) {
                    var changes = view.changes(in: key, after: .zero).makeIterator()
                    while let (name, e) = try changes.next() { if !e.deleted { bytes += e.pageCost(name) } }
                }
                return bytes
            }
        }
        return total
    }
}
