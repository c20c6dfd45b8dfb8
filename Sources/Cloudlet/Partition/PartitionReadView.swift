import CloudletCore
import CloudletStorage

/// Read access to a partition's indexes: the key directory (records, change index, reverse references), deleted
/// zones and the marks the liveness rule needs. Both the live ``PartitionState`` (read under the partition's lock)
/// and a detached ``PartitionReadView`` conform, so a reader is written once and can move from one to the other;
/// the read API itself (``entry(_:_:)``, ``records(in:)``, ``changes(in:after:)``, ``isLive(_:lsn:index:)``…) is
/// this protocol's extension, one implementation for both.
package protocol PartitionReading: Sendable {
    /// The key directory (KeyDirectory.swift).
    var keys: KeyDirectory { get }
    /// Zones deleted, with the LSN and time (ms) of the deletion, until purged.
    var deletedZones: [ZoneKey: (lsn: UInt64, time: Int64)] { get }
    /// LSN of the last applied commit: what the reader sees is the state as of it.
    var lastLSN: UInt64 { get }
    /// Tombstones and deleted zones with LSN ≤ this are forgotten.
    var purgedThroughLSN: UInt64 { get }
    /// The commit holding the current catalog-version mark, if any.
    var catalogMarkLSN: UInt64? { get }
}

extension PartitionReading {
    /// Whether the zone exists (a database's default zone always does).
    package func zoneExists(_ z: ZoneKey) -> Bool { z.zoneName == ZoneID.defaultZoneName || keys.contains(z) }

    /// The record's current entry (version or tombstone), if any.
    package func entry(_ z: ZoneKey, _ name: String) throws -> RecordEntry? { try keys.entry(z, name) }

    /// The zone's summary; nil for a zone the key directory does not hold (a default zone never written to).
    package func zone(_ z: ZoneKey) -> ZoneSummary? { keys.zone(z) }

    /// The zone's entries, tombstones included, in name order (from the first name after `after`).
    package func records(in z: ZoneKey, after: String? = nil) -> KeyDirectory.Entries { keys.entries(in: z, after: after) }

    /// The zone's current changes after `point`, in change order.
    package func changes(in z: ZoneKey, after point: ChangePoint) -> KeyDirectory.Changes { keys.changes(in: z, after: point) }

    /// The zones of `database` the key directory holds (custom zones, and default zones once written to), in no
    /// particular order.
    package func zoneKeys(of database: DatabaseID) -> [ZoneKey] { keys.zoneKeys.filter { database.holds($0) } }

    /// Whether mutation `index` of the commit at `lsn` is still current: the version or tombstone a record's entry
    /// holds, the creation of a zone that exists, the deletion of a zone that stays deleted, the partition's current
    /// catalog-version mark; index definitions and purges always are, catalog mutations (left in partition 0 by a
    /// format-1 store) never. Compaction keeps exactly the live ones. The one liveness rule: replay and the tools ask
    /// it of a ``Mutation``, compaction of a ``CommitOutline/Entry``, both through their ``LiveTarget``, of the state
    /// or of a read view; record liveness is a key directory lookup.
    package func isLive(_ target: LiveTarget, lsn: UInt64, index: UInt32) throws -> Bool {
        switch target {
        case .record(let z, let name): try entry(z, name)?.change == ChangePoint(lsn: lsn, index: index)
        case .zoneCreation(let z): zone(z)?.createdLSN == lsn
        case .zoneDeletion(let z): deletedZones[z]?.lsn == lsn
        case .catalogVersion: catalogMarkLSN == lsn
        case .always: true
        case .never: false
        }
    }

    package func isLive(_ m: Mutation, lsn: UInt64, index: UInt32) throws -> Bool {
        try isLive(m.liveTarget, lsn: lsn, index: index)
    }
}

/// A consistent, immutable view of a partition's indexes as of one LSN (``lastLSN``): what a reader that runs
/// long holds instead of the partition's lock — compaction deciding liveness, a query planning and reading.
///
/// Guarantees: every lookup answers as of ``lastLSN`` (the commits applied when the view was taken, none after);
/// the view never changes; it is released by dropping it. It does not copy: taking one is O(1).
///
/// The key directory's memtables are persistent trees and its runs immutable files, so a view is a copy of the
/// memtables' roots and a reference to the runs as of its LSN (which keeps their files until it goes): commits
/// never copy anything for it. The zone summaries, deleted zones and index definitions are copy-on-write values; the
/// secondary indexes themselves are key ranges of the directory, read through the view like the rest.
package struct PartitionReadView: PartitionReading {
    package let keys: KeyDirectory
    package let deletedZones: [ZoneKey: (lsn: UInt64, time: Int64)]
    package let lastLSN: UInt64
    package let purgedThroughLSN: UInt64
    package let catalogMarkLSN: UInt64?
    /// The secondary indexes as of the same LSN.
    let indexes: IndexState
    /// The partition's entry cache and its epoch when the view was taken (``Partition/queryView()``): while nothing
    /// has been invalidated since, the cache holds exactly this view's entries.
    var entryCache: (cache: EntryCache, epoch: UInt64)? = nil

    /// The record's entry as of this view, from the partition's entry cache while it still agrees with the view,
    /// else from the key directory (and then cached, on the same condition).
    func cachedEntry(_ z: ZoneKey, _ name: String) throws -> RecordEntry? {
        guard let (cache, epoch) = entryCache else { return try entry(z, name) }
        return try cache.entry(z, name, atEpoch: epoch) { try entry(z, name) }
    }
}

extension PartitionState: PartitionReading {
    package var catalogMarkLSN: UInt64? { catalogMark?.lsn }

    /// A read view of the state as it is now (O(1)).
    package var readView: PartitionReadView {
        PartitionReadView(
            keys: keys, deletedZones: deletedZones, lastLSN: lastLSN, purgedThroughLSN: purgedThroughLSN,
            catalogMarkLSN: catalogMarkLSN, indexes: indexes)
    }
}

/// A view of the key directory and the marks of the liveness rule as of one LSN, without the secondary indexes: what
/// a reader of records and changes alone holds outside the partition's lock (a change-feed page collected off the
/// cooperative pool). Taking one is O(1); it copies no secondary index, so commits made while it is held do not
/// have to copy any either.
package struct DirectoryReadView: PartitionReading {
    package let keys: KeyDirectory
    package let deletedZones: [ZoneKey: (lsn: UInt64, time: Int64)]
    package let lastLSN: UInt64
    package let purgedThroughLSN: UInt64
    package let catalogMarkLSN: UInt64?
}

extension PartitionState {
    /// A ``DirectoryReadView`` of the state as it is now.
    package var directoryView: DirectoryReadView {
        DirectoryReadView(
            keys: keys, deletedZones: deletedZones, lastLSN: lastLSN, purgedThroughLSN: purgedThroughLSN,
            catalogMarkLSN: catalogMarkLSN)
    }
}
