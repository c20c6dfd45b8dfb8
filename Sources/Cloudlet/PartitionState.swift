import CloudletCore
import CloudletStorage

/// Where the latest version of a record lives, and what the engine must know about it without reading it.
struct RecordEntry: Sendable, Hashable {
    /// LSN of the commit that wrote this version (or the tombstone).
    var lsn: UInt64
    /// The mutation's index in that commit: (lsn, index) orders every change of a partition.
    var index: UInt32
    /// The frame holding the record; unused for tombstones.
    var position: FramePosition
    /// The record's bytes inside the frame's (decompressed) payload.
    var slot: Commit.Slot
    var changeTag: String
    var recordType: String
    var deleted: Bool
    /// Modification time (or, for a tombstone, deletion time), ms since 1970.
    var time: Int64
    /// Names of the records this one references with DELETE_SELF (usually none).
    var deleteSelfTargets: [String]

    /// The position of this change in the partition's change order.
    var change: ChangePoint { ChangePoint(lsn: lsn, index: index) }
}

/// A point in a partition's change order: a commit's LSN and a mutation's index inside it.
struct ChangePoint: Hashable, Comparable, Sendable {
    var lsn: UInt64
    var index: UInt32

    static func < (a: ChangePoint, b: ChangePoint) -> Bool { (a.lsn, a.index) < (b.lsn, b.index) }
    /// Before every change.
    static let zero = ChangePoint(lsn: 0, index: 0)
}

/// One zone's key directory, reverse-reference index and change index.
struct ZoneState: Sendable {
    /// LSN of the zone's creation (0 for a default zone, which always exists): the zone's incarnation.
    var createdLSN: UInt64
    var records: [String: RecordEntry] = [:]
    var liveCount = 0
    /// target record name → names of records that reference it with DELETE_SELF.
    var deleteSelfSources: [String: Set<String>] = [:]
    /// Every change (put or tombstone) in change order; an element is current while the record's entry still
    /// has its change point. Stale elements are skipped and pruned once they outnumber the current ones.
    var changes: [(point: ChangePoint, name: String)] = []
    var staleChanges = 0
    /// LSN of the zone's last change (creation included).
    var lastChangeLSN: UInt64

    init(createdLSN: UInt64) {
        self.createdLSN = createdLSN
        lastChangeLSN = createdLSN
    }

    mutating func put(_ name: String, _ entry: RecordEntry) {
        if let old = records[name] {
            if !old.deleted { liveCount -= 1 }
            for t in old.deleteSelfTargets { removeSource(name, from: t) }
            staleChanges += 1
        }
        records[name] = entry
        if !entry.deleted { liveCount += 1 }
        for t in entry.deleteSelfTargets { deleteSelfSources[t, default: []].insert(name) }
        changes.append((entry.change, name))
        lastChangeLSN = max(lastChangeLSN, entry.lsn)
        if staleChanges > 1024 && staleChanges > changes.count / 2 { pruneChanges() }
    }

    /// Drops tombstones with LSN ≤ `through` (past the retention window).
    mutating func purgeTombstones(through: UInt64) {
        var dropped = 0
        for (name, e) in records where e.deleted && e.lsn <= through {
            records[name] = nil
            dropped += 1
        }
        if dropped > 0 {
            staleChanges += dropped
            pruneChanges()
        }
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

/// The state a partition derives from its log: zones, their key directories and change indexes, deleted zones,
/// and (partition 0) the schema. Rebuilt by replaying the log; checkpointed so that opening does not replay
/// everything.
struct PartitionState: Sendable {
    var zones: [ZoneKey: ZoneState] = [:]
    /// Zones deleted, with the LSN and time (ms) of the deletion (for database change feeds), until purged.
    var deletedZones: [ZoneKey: (lsn: UInt64, time: Int64)] = [:]
    var schema = SchemaCatalog()
    /// Secondary indexes of this partition's zones (IndexState.swift).
    var indexes = IndexState()
    /// LSN of the last applied commit.
    var lastLSN: UInt64 = 0
    /// Where the frame after `lastLSN` starts (the replay start of a checkpoint taken now).
    var nextPosition: FramePosition?
    /// Tombstones and deleted zones with LSN ≤ this are forgotten: change tokens before it have expired.
    var purgedThroughLSN: UInt64 = 0
    /// Subscriptions by subscriber and ID (partition 0 only).
    var subscriptions: [SubscriberID: [String: Subscription]] = [:]

    /// Whether the zone exists (a database's default zone always does).
    func zoneExists(_ z: ZoneKey) -> Bool { z.zoneName == ZoneID.defaultZoneName || zones[z] != nil }

    func entry(_ z: ZoneKey, _ name: String) -> RecordEntry? { zones[z]?.records[name] }

    /// Applies a commit: the one code path for live commits and for replay, so both derive the same state.
    mutating func apply(_ commit: Commit, lsn: UInt64, position: FramePosition, slots: [Int: Commit.Slot]) {
        for (i, m) in commit.mutations.enumerated() {
            switch m {
            case .putRecord(let z, let record, _):
                indexes.put(z, record, replacing: zones[z]?.records[record.recordName])
                var targets: [String] = []
                for value in record.fields.values {
                    switch value {
                    case .reference(let r) where r.action == .deleteSelf: targets.append(r.recordName)
                    case .list(.reference, let items):
                        for case .reference(let r) in items where r.action == .deleteSelf { targets.append(r.recordName) }
                    default: break
                    }
                }
                let entry = RecordEntry(
                    lsn: lsn, index: UInt32(i), position: position, slot: slots[i]!, changeTag: record.changeTag ?? "",
                    recordType: record.recordType, deleted: false, time: record.modified?.timestamp ?? 0,
                    deleteSelfTargets: targets)
                zones[z, default: ZoneState(createdLSN: 0)].put(record.recordName, entry)
            case .deleteRecord(let z, let name, let type, let time):
                guard zones[z] != nil else { continue }
                indexes.delete(z, name, recordType: type)
                let entry = RecordEntry(
                    lsn: lsn, index: UInt32(i), position: position, slot: Commit.Slot(offset: 0, length: 0),
                    changeTag: "", recordType: type, deleted: true, time: time, deleteSelfTargets: [])
                zones[z]!.put(name, entry)
            case .createZone(let z):
                if zones[z] == nil { zones[z] = ZoneState(createdLSN: lsn) }
                deletedZones[z] = nil
            case .deleteZone(let z, let time):
                zones[z] = nil
                indexes.dropZone(z)
                deletedZones[z] = (lsn, time)
            case .schemaField, .schemaReset:
                schema.apply(m)
            case .index(let change):
                schema.apply(m)
                indexes.apply(change, lsn: lsn)
            case .saveSubscription(let who, let sub):
                subscriptions[who, default: [:]][sub.id] = sub
            case .deleteSubscription(let who, let id):
                subscriptions[who]?[id] = nil
                if subscriptions[who]?.isEmpty == true { subscriptions[who] = nil }
            case .purge(let through):
                guard through > purgedThroughLSN else { continue }
                purgedThroughLSN = through
                for key in Array(zones.keys) { zones[key]!.purgeTombstones(through: through) }
                deletedZones = deletedZones.filter { $0.value.lsn > through }
            }
        }
        lastLSN = lsn
        nextPosition = position.next
    }

    /// What a purge may forget: the LSN of the newest tombstone (or zone deletion) such that it and every older
    /// one were deleted before `cutoff` (ms since 1970). Tokens at or after it missed nothing; nil when there is
    /// nothing to purge.
    func purgeHorizon(before cutoff: Int64) -> UInt64? {
        var bound = UInt64.max  // tombstones at or past this are inside the window
        var deletions: [(lsn: UInt64, time: Int64)] = []
        for zone in zones.values {
            for e in zone.records.values where e.deleted { deletions.append((e.lsn, e.time)) }
        }
        for d in deletedZones.values { deletions.append(d) }
        for d in deletions where d.time >= cutoff { bound = min(bound, d.lsn) }
        let horizon = deletions.filter { $0.lsn < bound && $0.lsn > purgedThroughLSN }.map(\.lsn).max()
        return horizon
    }
}

/// Change tags: derived from the commit's LSN and the mutation's index, so they are unique per saved version and
/// identical on every replica of the log.
enum ChangeTag {
    static func make(lsn: UInt64, index: Int) -> String {
        index == 0 ? String(lsn, radix: 36) : String(lsn, radix: 36) + "-" + String(index, radix: 36)
    }
}
