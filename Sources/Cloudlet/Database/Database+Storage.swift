import CloudletConcurrency
import CloudletCore

extension Database {
    /// The bytes this database's live records take: their stored sizes (what a response's byte budget counts,
    /// ``RecordEntry/pageCost(_:)``) plus the sizes of the asset files they reference, each reference counted (two
    /// records with the same file count it twice, as CloudKit counts an asset against whoever saved it). What a storage
    /// quota is measured in. Walks the key directory of every zone of the database and reads the records of the types
    /// that have asset fields (off the cooperative pool), so it costs one pass over the database's records.
    public func storageUsed() async throws -> Int {
        try await recordBytesUsed() + assetBytesUsed()
    }

    /// The asset part of ``storageUsed()``: the sizes of the asset files this database's live records reference
    /// (each reference counted, list members included).
    public func assetBytesUsed() async throws -> Int {
        try authorize(.read)
        let (store, id) = (self.store, self.id)
        return try await ThreadBridge.offload { () throws -> Int in
            var bytes = 0
            try store.forEachAsset(inZones: { id.holds($0) }) { _, _, _, asset in bytes += Int(asset.size) }
            return bytes
        }
    }

    /// The record part of ``storageUsed()``: the live records' stored sizes.
    public func recordBytesUsed() async throws -> Int {
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
