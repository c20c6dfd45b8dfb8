import CloudletCore
import CloudletStorage

/// Where the latest version of a record lives, and what the engine must know about it without reading it.
struct RecordEntry: Sendable, Hashable {
    /// LSN of the commit that wrote this version (or the tombstone).
    var lsn: UInt64
    /// The frame holding the record; unused for tombstones.
    var position: FramePosition
    /// The record's bytes inside the frame's (decompressed) payload.
    var slot: Commit.Slot
    var changeTag: String
    var recordType: String
    var deleted: Bool
    /// Names of the records this one references with DELETE_SELF (usually none).
    var deleteSelfTargets: [String]
}

/// One zone's key directory and reverse-reference index.
struct ZoneState: Sendable {
    /// LSN of the zone's creation (0 for a default zone, which always exists).
    var createdLSN: UInt64
    var records: [String: RecordEntry] = [:]
    var liveCount = 0
    /// target record name → names of records that reference it with DELETE_SELF.
    var deleteSelfSources: [String: Set<String>] = [:]

    init(createdLSN: UInt64) { self.createdLSN = createdLSN }

    mutating func put(_ name: String, _ entry: RecordEntry) {
        if let old = records[name] {
            if !old.deleted { liveCount -= 1 }
            for t in old.deleteSelfTargets { removeSource(name, from: t) }
        }
        records[name] = entry
        if !entry.deleted { liveCount += 1 }
        for t in entry.deleteSelfTargets { deleteSelfSources[t, default: []].insert(name) }
    }

    private mutating func removeSource(_ name: String, from target: String) {
        deleteSelfSources[target]?.remove(name)
        if deleteSelfSources[target]?.isEmpty == true { deleteSelfSources[target] = nil }
    }
}

/// The state a partition derives from its log: zones, their key directories, and (partition 0) the schema.
/// Rebuilt by replaying the log; checkpointed so that opening does not replay everything.
struct PartitionState: Sendable {
    var zones: [ZoneKey: ZoneState] = [:]
    /// Zones deleted, with the LSN of the deletion (for database change feeds).
    var deletedZones: [ZoneKey: UInt64] = [:]
    var schema = SchemaCatalog()
    /// LSN of the last applied commit.
    var lastLSN: UInt64 = 0
    /// Where the frame after `lastLSN` starts (the replay start of a checkpoint taken now).
    var nextPosition: FramePosition?

    /// Whether the zone exists (a database's default zone always does).
    func zoneExists(_ z: ZoneKey) -> Bool { z.zoneName == ZoneID.defaultZoneName || zones[z] != nil }

    func entry(_ z: ZoneKey, _ name: String) -> RecordEntry? { zones[z]?.records[name] }

    /// Applies a commit: the one code path for live commits and for replay, so both derive the same state.
    mutating func apply(_ commit: Commit, lsn: UInt64, position: FramePosition, slots: [Int: Commit.Slot]) {
        for (i, m) in commit.mutations.enumerated() {
            switch m {
            case .putRecord(let z, let record, _):
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
                    lsn: lsn, position: position, slot: slots[i]!, changeTag: record.changeTag ?? "",
                    recordType: record.recordType, deleted: false, deleteSelfTargets: targets)
                zones[z, default: ZoneState(createdLSN: 0)].put(record.recordName, entry)
            case .deleteRecord(let z, let name, let type):
                guard zones[z] != nil else { continue }
                let entry = RecordEntry(
                    lsn: lsn, position: position, slot: Commit.Slot(offset: 0, length: 0), changeTag: "",
                    recordType: type, deleted: true, deleteSelfTargets: [])
                zones[z]!.put(name, entry)
            case .createZone(let z):
                if zones[z] == nil { zones[z] = ZoneState(createdLSN: lsn) }
                deletedZones[z] = nil
            case .deleteZone(let z):
                zones[z] = nil
                deletedZones[z] = lsn
            case .schemaField, .schemaReset:
                schema.apply(m)
            }
        }
        lastLSN = lsn
        nextPosition = FramePosition(segment: position.segment, offset: position.offset + UInt64(position.length), length: 0)
    }
}

/// Change tags: derived from the commit's LSN and the mutation's index, so they are unique per saved version and
/// identical on every replica of the log.
enum ChangeTag {
    static func make(lsn: UInt64, index: Int) -> String {
        index == 0 ? String(lsn, radix: 36) : String(lsn, radix: 36) + "-" + String(index, radix: 36)
    }
}
