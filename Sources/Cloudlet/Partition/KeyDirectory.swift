import CloudletCore
import CloudletStorage

/// What the key directory knows of one zone besides its records.
package struct ZoneSummary: Sendable, Hashable {
    /// LSN of the zone's creation (0 for a default zone, which always exists): the zone's incarnation.
    package var createdLSN: UInt64
    /// LSN of the zone's last change (creation included).
    package var lastChangeLSN: UInt64
    /// Records that exist (entries that are not tombstones).
    package var liveCount: Int
    /// Entries, tombstones included.
    package var entryCount: Int
    /// Elements of the change index, stale ones included (what it costs in memory).
    package var changeIndexCount: Int
}

/// One partition's key directory: per zone, record name → ``RecordEntry`` (where the latest version lives, its
/// change point and so its change tag, its type and time), the DELETE_SELF reverse index, and the **change
/// index** — every change in change order, which change feeds page through with ``changes(in:after:)``.
///
/// A struct rather than a protocol: it sits in ``PartitionState``, a value behind the partition's lock that every
/// commit mutates, so an existential would box it and dispatch every lookup dynamically, and a generic parameter
/// would spread to the partition, the planner and the tools. Its read API (``entry(_:_:)``, ``zone(_:)``,
/// ``entries(in:)``, ``changes(in:after:)``, ``deleteSelfSources(in:referencing:)``) is the seam: readers use only
/// that, so the storage behind it — today's dictionaries, the *memtable* — can become a memtable over flushed
/// sorted runs (`LSMTree`) without touching them (docs/index-layer.md). The write API (``put(_:_:_:)``,
/// ``purgeTombstones(through:)``, ``move(_:_:_:to:slot:cost:)``…) is the module's, for ``PartitionState/apply``,
/// compaction's moves and checkpoint loading only.
///
/// Enumeration (``entries(in:)``) is unordered; the change index is ordered by ``ChangePoint``.
package struct KeyDirectory: Sendable {
    private var zones: [ZoneKey: ZoneState] = [:]

    package init() {}

    // MARK: - Reading

    /// The record's current entry (a version or a tombstone); nil if the directory has none (never written, or
    /// its tombstone purged, or its zone gone).
    package func entry(_ z: ZoneKey, _ name: String) -> RecordEntry? { zones[z]?.records[name] }

    /// Whether the directory holds the zone (a default zone is held once written to).
    package func contains(_ z: ZoneKey) -> Bool { zones[z] != nil }

    /// The zone's summary; nil if the directory does not hold it.
    package func zone(_ z: ZoneKey) -> ZoneSummary? {
        guard let zone = zones[z] else { return nil }
        return ZoneSummary(
            createdLSN: zone.createdLSN, lastChangeLSN: zone.lastChangeLSN, liveCount: zone.liveCount,
            entryCount: zone.records.count, changeIndexCount: zone.changes.count)
    }

    /// The zones held, in no particular order.
    package var zoneKeys: some Collection<ZoneKey> { zones.keys }

    /// How many zones are held.
    package var zoneCount: Int { zones.count }

    /// Records that exist, over every zone.
    package var liveCount: Int { zones.values.reduce(0) { $0 + $1.liveCount } }

    /// The zone's entries (tombstones included), in no particular order; empty for a zone not held. Does not copy.
    package func entries(in z: ZoneKey) -> Entries { Entries(records: zones[z]?.records ?? [:]) }

    /// The zone's current changes after `point`, in change order: each record at most once, at its current
    /// version or tombstone (superseded changes are skipped here and pruned inside). Does not copy.
    package func changes(in z: ZoneKey, after point: ChangePoint) -> Changes {
        guard let zone = zones[z] else { return Changes(zone: nil, start: 0) }
        return Changes(zone: zone, start: zone.firstChange(after: point))
    }

    /// Names of the records in the zone that reference `target` with DELETE_SELF.
    package func deleteSelfSources(in z: ZoneKey, referencing target: String) -> Set<String> {
        zones[z]?.deleteSelfSources[target] ?? []
    }

    /// A zone's entries: a view of the directory, not a copy.
    package struct Entries: Sequence, Sendable {
        fileprivate let records: [String: RecordEntry]

        package var count: Int { records.count }
        package var isEmpty: Bool { records.isEmpty }

        package func makeIterator() -> some IteratorProtocol<(name: String, entry: RecordEntry)> {
            records.lazy.map { (name: $0.key, entry: $0.value) }.makeIterator()
        }
    }

    /// A zone's current changes from some point on, in change order.
    package struct Changes: Sequence, Sendable {
        fileprivate let zone: ZoneState?
        fileprivate let start: Int

        package struct Iterator: IteratorProtocol {
            fileprivate let zone: ZoneState?
            fileprivate var i: Int

            package mutating func next() -> (name: String, entry: RecordEntry)? {
                guard let zone else { return nil }
                while i < zone.changes.count {
                    let (point, name) = zone.changes[i]
                    i += 1
                    if let e = zone.records[name], e.change == point { return (name, e) }
                }
                return nil
            }
        }

        package func makeIterator() -> Iterator { Iterator(zone: zone, i: start) }
    }

    // MARK: - Writing (PartitionState.apply, compaction's moves, checkpoint loading)

    /// Creates the zone at `lsn` unless it is held; returns whether it did.
    mutating func createZone(_ z: ZoneKey, lsn: UInt64) -> Bool {
        guard zones[z] == nil else { return false }
        zones[z] = ZoneState(createdLSN: lsn)
        return true
    }

    /// Removes the zone; returns its entries (to free what they kept alive), nil if it was not held.
    mutating func removeZone(_ z: ZoneKey) -> Entries? {
        zones.removeValue(forKey: z).map { Entries(records: $0.records) }
    }

    /// Makes `entry` the record's current version; returns the one it replaces. A zone not held is created with
    /// incarnation 0 (a default zone).
    @discardableResult
    mutating func put(_ z: ZoneKey, _ name: String, _ entry: RecordEntry) -> RecordEntry? {
        zones[z, default: ZoneState(createdLSN: 0)].put(name, entry)
    }

    /// Drops every tombstone with LSN ≤ `through`; returns them. A default zone left without entries is dropped (as
    /// if never written to: a compacted log has nothing of it).
    mutating func purgeTombstones(through: UInt64) -> [RecordEntry] {
        var dropped: [RecordEntry] = []
        for key in Array(zones.keys) {
            dropped += zones[key]!.purgeTombstones(through: through)
            if key.zoneName == ZoneID.defaultZoneName && zones[key]!.records.isEmpty { zones[key] = nil }
        }
        return dropped
    }

    /// Points the record's entry at a new place if it is still the version `change` (compaction moved it).
    mutating func move(_ z: ZoneKey, _ name: String, _ change: ChangePoint, to position: FramePosition, slot: Commit.Slot, cost: UInt32) -> Bool {
        zones[z]?.move(name, change, to: position, slot: slot, cost: cost) ?? false
    }

    /// Loads a zone from a checkpoint: its entries, and its summary's LSNs (the rest is derived).
    mutating func load(_ z: ZoneKey, createdLSN: UInt64, lastChangeLSN: UInt64, entries: [(name: String, entry: RecordEntry)]) {
        var zone = ZoneState(createdLSN: createdLSN)
        zone.records.reserveCapacity(entries.count)
        for (name, e) in entries { _ = zone.put(name, e) }
        zone.pruneChanges()
        zone.lastChangeLSN = lastChangeLSN
        zones[z] = zone
    }
}

/// One zone of the in-memory key directory (the memtable): entries, reverse-reference index, change index.
private struct ZoneState: Sendable {
    var createdLSN: UInt64
    var records: [String: RecordEntry] = [:]
    var liveCount = 0
    /// target record name → names of records that reference it with DELETE_SELF.
    var deleteSelfSources: [String: Set<String>] = [:]
    /// Every change (put or tombstone) in change order; an element is current while the record's entry still
    /// has its change point. Stale elements are skipped and pruned once they outnumber the current ones.
    var changes: [(point: ChangePoint, name: String)] = []
    var staleChanges = 0
    var lastChangeLSN: UInt64

    init(createdLSN: UInt64) {
        self.createdLSN = createdLSN
        lastChangeLSN = createdLSN
    }

    mutating func put(_ name: String, _ entry: RecordEntry) -> RecordEntry? {
        let previous = records.updateValue(entry, forKey: name)
        if let old = previous {
            if !old.deleted { liveCount -= 1 }
            for t in old.deleteSelfTargets { removeSource(name, from: t) }
            staleChanges += 1
        }
        if !entry.deleted { liveCount += 1 }
        for t in entry.deleteSelfTargets { deleteSelfSources[t, default: []].insert(name) }
        changes.append((entry.change, name))
        lastChangeLSN = max(lastChangeLSN, entry.lsn)
        if staleChanges > 1024 && staleChanges > changes.count / 2 { pruneChanges() }
        return previous
    }

    /// Drops tombstones with LSN ≤ `through` (past the retention window); returns them. When the zone's last
    /// change is among them, its last change becomes its newest remaining one (or its creation), which is what a
    /// replay of the compacted log — where those tombstones no longer exist — derives as well.
    mutating func purgeTombstones(through: UInt64) -> [RecordEntry] {
        var dropped: [RecordEntry] = []
        for (name, e) in records where e.deleted && e.lsn <= through {
            records[name] = nil
            dropped.append(e)
        }
        if lastChangeLSN <= through {
            lastChangeLSN = records.values.reduce(createdLSN) { max($0, $1.lsn) }
        }
        if !dropped.isEmpty {
            staleChanges += dropped.count
            pruneChanges()
        }
        return dropped
    }

    mutating func move(_ name: String, _ change: ChangePoint, to position: FramePosition, slot: Commit.Slot, cost: UInt32) -> Bool {
        guard let i = records.index(forKey: name), records.values[i].change == change else { return false }
        records.values[i].position = position
        records.values[i].slot = slot
        records.values[i].cost = cost
        return true
    }

    /// Rebuilds the change index from the current entries.
    mutating func pruneChanges() {
        changes = records.map { ($0.value.change, $0.key) }.sorted { $0.point < $1.point }
        staleChanges = 0
    }

    /// Index of the first change after `point` (binary search).
    func firstChange(after point: ChangePoint) -> Int {
        var lo = 0
        var hi = changes.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if changes[mid].point <= point { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    private mutating func removeSource(_ name: String, from target: String) {
        deleteSelfSources[target]?.remove(name)
        if deleteSelfSources[target]?.isEmpty == true { deleteSelfSources[target] = nil }
    }
}
