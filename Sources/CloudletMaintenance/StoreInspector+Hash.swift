import Cloudlet
import CloudletCore
import CloudletStorage

/// SHA-256 of fields, each length-prefixed (over the engine's ``SHA256Stream``).
struct SHA256Digest {
    private let stream = SHA256Stream()

    func update<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        let done = bytes.withContiguousStorageIfAvailable { stream.update(UnsafeRawBufferPointer($0)) }
        if done == nil { stream.update(Array(bytes)) }
    }

    /// Length-prefixed, so that concatenations are unambiguous.
    func field<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        var n = UInt64(bytes.count).littleEndian
        withUnsafeBytes(of: &n) { stream.update($0) }
        update(bytes)
    }

    func field(_ s: String) { field(Array(s.utf8)) }

    func finish() -> [UInt8] { stream.finish() }
}

/// Deterministic digests of a store's logical content (`cloudlet-tool hash`), equal on two stores with the same
/// content however their logs are laid out or compacted. See README, "cloudlet-tool".
package struct ContentHash: Sendable {
    package struct Zone: Sendable {
        package var partition: Int
        package var key: ZoneKey
        package var records: Int
        package var tombstones: Int
        package var digest: String
    }

    package struct Database: Sendable {
        package var id: DatabaseID
        package var zones: Int
        package var records: Int
        package var digest: String
    }

    package struct Partition: Sendable {
        package var index: Int
        package var zones: Int
        package var records: Int
        package var digest: String
    }

    package var zones: [Zone] = []
    package var databases: [Database] = []
    package var partitions: [Partition] = []
    /// Over every zone, whatever partition holds it.
    package var store: String = ""
    package var records = 0
    /// Over the catalog's content: schemas (types, fields, index flags) and subscriptions.
    package var catalog: String = ""
}

package struct HashOptions: Sendable {
    /// Hash tombstones (record name and type) too.
    package var includeTombstones = false
    /// Leave change tags out (to compare a store with a re-import of it).
    package var ignoreChangeTags = false
    package init() {}
}

extension StoreInspector {
    /// The content hash: per zone, SHA-256 over its records sorted by name (each: name, then the record's stored
    /// encoding — type, name, change tag, created/modified stamps, fields sorted by name); per database, partition
    /// and store, SHA-256 over the (zone name, zone digest) pairs sorted by zone name. A custom zone is part of the
    /// content even when empty; a default zone only when it holds something.
    package func hash(
        store: CloudletStore, filter: InspectionFilter, options: HashOptions, progress: ProgressHandler? = nil
    ) throws -> ContentHash {
        var filter = filter
        filter.includeTombstones = options.includeTombstones
        filter.lsns = nil
        var perZone: [ZoneKey: [(name: String, digest: [UInt8], tombstone: Bool)]] = [:]
        var zonePartition: [ZoneKey: Int] = [:]
        for z in zones(in: store, filter: filter) {
            perZone[z.zone] = []
            zonePartition[z.zone] = z.partition
        }
        try forEachCurrent(in: store, filter: filter, progress: progress) { r in
            let d = SHA256Digest()
            d.field(r.recordName)
            if let record = r.record {
                if options.ignoreChangeTags {
                    var copy = record
                    copy.changeTag = nil
                    d.field(RecordCodec.encode(copy))
                } else {
                    d.field(r.encoded)
                }
            } else {
                d.field("deleted " + r.recordType)
            }
            perZone[r.zone, default: []].append((r.recordName, d.finish(), r.isTombstone))
            zonePartition[r.zone] = r.partition
        }
        var out = ContentHash()
        var zoneDigests: [(key: ZoneKey, digest: [UInt8])] = []
        for (key, records) in perZone {
            let d = SHA256Digest()
            d.field(key.zoneName)
            for r in records.sorted(by: { $0.name < $1.name }) {
                d.field(r.name)
                d.field(r.digest)
            }
            let digest = d.finish()
            zoneDigests.append((key, digest))
            let tombstones = records.filter(\.tombstone).count
            out.zones.append(
                ContentHash.Zone(
                    partition: zonePartition[key] ?? 0, key: key, records: records.count - tombstones,
                    tombstones: tombstones, digest: hex(digest)))
        }
        zoneDigests.sort { $0.key.canonicalName < $1.key.canonicalName }
        out.zones.sort { $0.key.canonicalName < $1.key.canonicalName }
        out.records = out.zones.reduce(0) { $0 + $1.records }

        func combine(_ items: [(key: ZoneKey, digest: [UInt8])], name: (ZoneKey) -> String) -> String {
            let d = SHA256Digest()
            for item in items.sorted(by: { name($0.key) < name($1.key) }) {
                d.field(name(item.key))
                d.field(item.digest)
            }
            return hex(d.finish())
        }
        out.store = combine(zoneDigests) { $0.canonicalName }
        out.catalog = catalogDigest(store)
        let byDatabase = Dictionary(grouping: zoneDigests, by: { $0.key.ownerDatabase })
        for (db, items) in byDatabase {
            let records = out.zones.filter { $0.key.ownerDatabase == db }.reduce(0) { $0 + $1.records }
            out.databases.append(ContentHash.Database(id: db, zones: items.count, records: records, digest: combine(items) { $0.zoneName }))
        }
        out.databases.sort { $0.id.description < $1.id.description }
        for p in 0..<partitionCount {
            let items = zoneDigests.filter { zonePartition[$0.key] == p }
            let records = out.zones.filter { $0.partition == p }.reduce(0) { $0 + $1.records }
            out.partitions.append(ContentHash.Partition(index: p, zones: items.count, records: records, digest: combine(items) { $0.canonicalName }))
        }
        return out
    }
}

func hex(_ bytes: [UInt8]) -> String { SHA256Stream.hex(bytes) }
