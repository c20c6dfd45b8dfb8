import CloudletCore
import CloudletStorage

/// Where the latest version of a record lives, and what the engine must know about it without reading it.
package struct RecordEntry: Sendable, Hashable {
    /// LSN of the commit that wrote this version (or the tombstone).
    package var lsn: UInt64
    /// The mutation's index in that commit: (lsn, index) orders every change of a partition.
    package var index: UInt32
    /// The frame holding the record; unused for tombstones.
    package var position: FramePosition
    /// The record's bytes inside the frame's (decompressed) payload.
    package var slot: Commit.Slot
    package var recordType: String
    package var deleted: Bool
    /// Modification time (or, for a tombstone, deletion time), ms since 1970.
    var time: Int64
    /// Names of the records this one references with DELETE_SELF (usually none).
    package var deleteSelfTargets: [String]
    /// The bytes of its segment this version (or tombstone) keeps alive: its share of its frame
    /// (``Commit/costs(sizes:frameLength:)``); freed when it is superseded or purged.
    var cost: UInt32 = 0
    /// The version's creation stamp (system field `created`), so that a replace keeps it without reading the
    /// version it replaces; nil for a tombstone, and for versions whose entry was written before entries kept it
    /// (store format 4).
    package var created: RecordStamp? = nil
    /// For a tombstone: the deleted version's parent, when the deletion recorded it (in a zone a hierarchy share
    /// covers through parents); nil otherwise, and for a live version (whose parent is in the record).
    package var parent: String? = nil

    /// The version's change tag: derived from where it was committed (``ChangeTag/make(lsn:index:)``), as every
    /// writer stamps it, so the key directory does not store it; empty for a tombstone.
    package var changeTag: String { deleted ? "" : ChangeTag.make(lsn: lsn, index: Int(index)) }

    /// Whether `tag` is ``changeTag``, checked without building it.
    package func hasChangeTag(_ tag: String) -> Bool {
        deleted ? tag.isEmpty : ChangeTag.matches(tag, lsn: lsn, index: Int(index))
    }

    /// The position of this change in the partition's change order.
    var change: ChangePoint { ChangePoint(lsn: lsn, index: index) }

    /// What this version costs a page's byte budget (`maxBytes` of change feeds, queries and lookups): the
    /// record's stored size, or for a tombstone its name and 64 bytes of the rest. Known without reading.
    func pageCost(_ name: String) -> Int { deleted ? name.utf8.count + 64 : Int(slot.recordLength) }
}

/// What a mutation keeps current while it is live (``PartitionState/isLive(_:lsn:index:)``).
package enum LiveTarget {
    /// A record's version or tombstone.
    case record(ZoneKey, String)
    case zoneCreation(ZoneKey)
    case zoneDeletion(ZoneKey)
    /// The partition's catalog-version mark.
    case catalogVersion
    /// Index definitions and purges.
    case always
    /// Catalog mutations in a data partition's log (format 1).
    case never
}

extension Mutation {
    package var liveTarget: LiveTarget {
        switch self {
        case .putRecord(let z, let r, _): .record(z, r.recordName)
        case .deleteRecord(let z, let name, _, _, _): .record(z, name)
        case .createZone(let z): .zoneCreation(z)
        case .deleteZone(let z, _): .zoneDeletion(z)
        case .catalogVersion: .catalogVersion
        case .schemaField, .schemaReset, .index(.flags), .index(.composite), .saveSubscription, .deleteSubscription, .security: .never
        case .purge, .index: .always
        }
    }
}

/// A point in a partition's change order: a commit's LSN and a mutation's index inside it.
package struct ChangePoint: Hashable, Comparable, Sendable {
    var lsn: UInt64
    var index: UInt32

    package static func < (a: ChangePoint, b: ChangePoint) -> Bool { (a.lsn, a.index) < (b.lsn, b.index) }
    /// Before every change.
    static let zero = ChangePoint(lsn: 0, index: 0)
}

/// Where a live zone creation or deletion sits in the log, and the bytes it keeps alive there.
struct LiveSpan: Sendable, Hashable {
    var segment: UInt64
    var cost: UInt32
}

/// The newest catalog version a partition's commits were validated against, and the mutation that recorded it
/// (``Mutation/catalogVersion(_:)``): the one such mutation that stays live.
struct CatalogMark: Sendable, Hashable {
    var version: UInt64
    /// The commit that recorded it.
    var lsn: UInt64
    var span: LiveSpan
}

/// The state a partition derives from its log: zones, their key directories and change indexes, deleted zones,
/// index definitions, and the catalog version its commits were validated against. Rebuilt by replaying the log;
/// checkpointed so that opening does not replay everything. Schema and subscriptions are the catalog's
/// (``CatalogState``).
package struct PartitionState: Sendable {
    /// Records, their change index and reverse references, per zone (KeyDirectory.swift). Written only by
    /// ``apply(_:lsn:position:slots:costs:)``, compaction's ``moveRecord(_:_:_:to:slot:cost:)`` and checkpoint
    /// loading (``loadZone(_:createdLSN:lastChangeLSN:entries:)``).
    package private(set) var keys = KeyDirectory()
    /// Zones deleted, with the LSN and time (ms) of the deletion (for database change feeds), until purged.
    package internal(set) var deletedZones: [ZoneKey: (lsn: UInt64, time: Int64)] = [:]
    /// Secondary indexes of this partition's zones: their definitions here, their contents in ``keys``
    /// (IndexState.swift).
    var indexes = IndexState()
    /// Whether opening moved secondary indexes held by an older flushed state (version 6) or checkpoint into the key
    /// directory (``migrateIndexes(_:checkpoint:)``): the partition flushes them at open.
    var indexesMigrated = false
    /// LSN of the last applied commit (set by the verify tool too: a compacted log may end past its last frame).
    package var lastLSN: UInt64 = 0
    /// Where the frame after `lastLSN` starts (the replay start of a checkpoint taken now).
    var nextPosition: FramePosition?
    /// Tombstones and deleted zones with LSN ≤ this are forgotten: change tokens before it have expired.
    package internal(set) var purgedThroughLSN: UInt64 = 0
    /// The catalog version every commit so far was validated against (at most), and where that was recorded.
    var catalogMark: CatalogMark?
    /// Partition 0 of a format-1 store being opened: the catalog its log still holds (schema, index flags,
    /// subscriptions), gathered by replay for the migration to the catalog's own log. Nil otherwise: catalog
    /// mutations in a data partition's log are then ignored (and dead, so compaction drops them).
    var legacyCatalog: CatalogState?
    /// The compaction generation the positions in this state refer to (0: never compacted). A checkpoint of
    /// another generation is ignored on open: the frames it points at have moved.
    package internal(set) var compactionGeneration: UInt32 = 0
    /// Live bytes per segment (by segment id): the frames' bytes whose mutations are still current. Dead bytes are
    /// a segment's size minus this; compaction starts when they are a large enough share.
    package internal(set) var segmentLive: [UInt64: Int64] = [:]
    /// Where the creation of each existing custom zone, and the deletion of each deleted zone, is in the log.
    var zoneCreations: [ZoneKey: LiveSpan] = [:]
    var zoneDeletions: [ZoneKey: LiveSpan] = [:]

    /// An empty state (the synthesized initializer, made `package` for offline verification's replays).
    package init() {}

    /// Points a record's entry at where compaction moved it, if it is still the version `change`.
    mutating func moveRecord(_ z: ZoneKey, _ name: String, _ change: ChangePoint, to position: FramePosition, slot: Commit.Slot, cost: UInt32) throws -> Bool {
        try keys.move(z, name, change, to: position, slot: slot, cost: cost, sequence: lastLSN)
    }

    /// Loads a zone of the key directory from a checkpoint of a format-3 store.
    mutating func loadZone(_ z: ZoneKey, createdLSN: UInt64, lastChangeLSN: UInt64, entries: [(name: String, entry: RecordEntry)]) throws {
        try keys.load(z, createdLSN: createdLSN, lastChangeLSN: lastChangeLSN, entries: entries)
    }

    /// The key directory's memtable and this state's small part are about to be flushed: sets the memtable aside
    /// (with ``encodeState()``) and returns it.
    mutating func freezeDirectory() -> Memtable { keys.freeze(state: encodeState(), sequence: lastLSN) }

    mutating func directoryFlushed(base: LSMReadView) { keys.flushed(base: base) }

    mutating func directoryFlushFailed() { keys.flushFailed() }

    mutating func rebaseDirectory(_ base: LSMReadView) { keys.rebase(base) }

    /// Adds a record that predates index `d` to it (``IndexState/buildInsert(_:zone:name:values:keys:sequence:)``).
    mutating func buildIndex(_ d: IndexDefinition, zone z: ZoneKey, name: String, values: [String: FieldValue?]) throws {
        try indexes.buildInsert(d, zone: z, name: name, values: values, keys: &keys, sequence: lastLSN)
    }

    /// Reads the secondary indexes of a version-6 flushed state or a format-3 checkpoint into the key directory
    /// (``IndexState/migrate(_:keys:sequence:checkpoint:)``).
    mutating func migrateIndexes(_ r: inout ByteReader, checkpoint: Bool) throws {
        try migrateTextPostings(try IndexState.migrate(&r, keys: &keys, sequence: lastLSN, checkpoint: checkpoint))
    }

    /// Installs `read` (indexes of a state older than version 8) with its full-text postings and totals derived.
    mutating func migrateTextPostings(_ read: IndexState) throws {
        indexes = read
        try indexes.migrateTextPostings(keys: &keys, sequence: lastLSN)
        indexesMigrated = true
    }

    /// Installs the key directory opened from the partition's runs (before replaying the log's tail).
    mutating func setDirectory(_ directory: KeyDirectory) { keys = directory }

    /// The catalog version the partition's commits were validated against so far (0: none).
    package var catalogVersion: UInt64 { catalogMark?.version ?? 0 }

    private mutating func addLive(_ segment: UInt64, _ cost: UInt32) {
        guard cost > 0 else { return }
        segmentLive[segment, default: 0] += Int64(cost)
    }

    private mutating func freeLive(_ segment: UInt64, _ cost: UInt32) {
        guard cost > 0 else { return }
        segmentLive[segment, default: 0] -= Int64(cost)
    }

    /// Applies a commit: the one code path for live commits and for replay, so both derive the same state.
    /// `costs[k]`: the bytes of its frame mutation `k` keeps alive (``Commit/costs(sizes:frameLength:)``).
    /// `known`: key-directory entries the commit's planner looked up in this state just before (nil in replay).
    package mutating func apply(
        _ commit: Commit, lsn: UInt64, position: FramePosition, slots: [Int: Commit.Slot], costs: [UInt32],
        known: PlannedLookups? = nil
    ) throws {
        // A known entry stands for the state before the commit: it serves the first write of its record only.
        var written: Set<String> = []
        func previous(_ z: ZoneKey, _ name: String) -> RecordEntry?? {
            guard let known, known.zone == z, written.insert(name).inserted else { return nil }
            return known.entries[name]
        }
        for (k, m) in commit.mutations.enumerated() {
            let i = Int(commit.index(k))
            let cost = k < costs.count ? costs[k] : 0
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
                    lsn: lsn, index: UInt32(i), position: position, slot: slots[k]!, recordType: record.recordType, deleted: false, time: record.modified?.timestamp ?? 0,
                    deleteSelfTargets: targets, cost: cost, created: record.created)
                addLive(position.segment, cost)
                let old = try keys.put(z, record.recordName, entry, known: previous(z, record.recordName))
                if let old { freeLive(old.position.segment, old.cost) }
                try indexes.put(z, record, replacing: old, lsn: lsn, keys: &keys)
            case .deleteRecord(let z, let name, let type, let time, let parent):
                // A default zone exists without a creation; in a compacted log its tombstones can come first.
                guard zoneExists(z) else { continue }
                var entry = RecordEntry(
                    lsn: lsn, index: UInt32(i), position: position, slot: Commit.Slot(offset: 0, length: 0),
                    recordType: type, deleted: true, time: time, deleteSelfTargets: [], cost: cost)
                entry.parent = parent
                addLive(position.segment, cost)
                let old = try keys.put(z, name, entry, known: previous(z, name))
                if let old { freeLive(old.position.segment, old.cost) }
                try indexes.delete(z, name, replacing: old, lsn: lsn, keys: &keys)
            case .createZone(let z):
                if keys.createZone(z, lsn: lsn) {
                    zoneCreations[z] = LiveSpan(segment: position.segment, cost: cost)
                    addLive(position.segment, cost)
                }
                deletedZones[z] = nil
                if let d = zoneDeletions.removeValue(forKey: z) { freeLive(d.segment, d.cost) }
            case .deleteZone(let z, let time):
                if let entries = try keys.removeZone(z, lsn: lsn) {
                    for e in entries { freeLive(e.position.segment, e.cost) }
                }
                indexes.dropZone(z)
                if let c = zoneCreations.removeValue(forKey: z) { freeLive(c.segment, c.cost) }
                if let d = zoneDeletions.updateValue(LiveSpan(segment: position.segment, cost: cost), forKey: z) {
                    freeLive(d.segment, d.cost)
                }
                addLive(position.segment, cost)
                deletedZones[z] = (lsn, time)
            case .schemaField, .schemaReset, .index(.flags), .index(.composite), .saveSubscription, .deleteSubscription, .security:
                // A format-1 store's catalog, in its partition 0: gathered for the migration, dead otherwise.
                legacyCatalog?.apply(m)
            case .index(let change):
                try indexes.apply(change, lsn: lsn, keys: &keys)
                addLive(position.segment, cost)
            case .catalogVersion(let version):
                guard version > catalogVersion else { continue }
                if let old = catalogMark { freeLive(old.span.segment, old.span.cost) }
                catalogMark = CatalogMark(version: version, lsn: lsn, span: LiveSpan(segment: position.segment, cost: cost))
                addLive(position.segment, cost)
            case .purge(let through):
                addLive(position.segment, cost)
                guard through > purgedThroughLSN else { continue }
                purgedThroughLSN = through
                for e in try keys.purgeTombstones(through: through, lsn: lsn) { freeLive(e.position.segment, e.cost) }
                for (z, d) in deletedZones where d.lsn <= through {
                    deletedZones[z] = nil
                    if let span = zoneDeletions.removeValue(forKey: z) { freeLive(span.segment, span.cost) }
                }
            }
        }
        lastLSN = lsn
        nextPosition = position.next
    }

    /// What a purge may forget: the LSN of the newest tombstone (or zone deletion) such that it and every older
    /// one were deleted before `cutoff` (ms since 1970). Tokens at or after it missed nothing; nil when there is
    /// nothing to purge.
    func purgeHorizon(before cutoff: Int64) throws -> UInt64? {
        // Deletions inside the window bound it: nothing from the first of them on may be forgotten.
        let zoneBound = deletedZones.values.filter { $0.time >= cutoff }.map(\.lsn).min() ?? .max
        var bound = zoneBound
        var newest: UInt64?  // the newest tombstone before the bound
        try keys.forEachTombstone { _, _, point, time in
            guard point.lsn < zoneBound else { return false }
            if time >= cutoff {
                bound = point.lsn
                return false
            }
            newest = point.lsn
            return true
        }
        let zones = deletedZones.values.map(\.lsn).filter { $0 < bound }
        return (zones + (newest.map { [$0] } ?? [])).filter { $0 > purgedThroughLSN }.max()
    }
}

/// The key-directory entries a batch planner looked up in one zone of a partition's state, under the writer lock,
/// handed to ``PartitionState/apply(_:lsn:position:slots:costs:known:)`` of the same commit so that it does not look
/// them up again (name → entry, nil: none). It may start with the entries a prefetch found, when they are still
/// current (``Partition/Prefetched/seed(_:currentEpoch:)``). Used by one writer at a time, under the partition's
/// lock.
package final class PlannedLookups: @unchecked Sendable {
    let zone: ZoneKey
    var entries: [String: RecordEntry?] = [:]

    init(zone: ZoneKey) { self.zone = zone }
}

/// Change tags: derived from the commit's LSN and the mutation's index, so they are unique per saved version and
/// identical on every replica of the log.
package enum ChangeTag {
    package static func make(lsn: UInt64, index: Int) -> String {
        index == 0 ? String(lsn, radix: 36) : String(lsn, radix: 36) + "-" + String(index, radix: 36)
    }

    /// Whether `tag` is ``make(lsn:index:)`` of `lsn` and `index`, read without building that string (a point read
    /// checks the tag of every record it decodes).
    package static func matches(_ tag: String, lsn: UInt64, index: Int) -> Bool {
        var parts: (UInt64, UInt64) = (0, 0)
        var second = false
        var digits = 0
        for c in tag.utf8 {
            let d: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): d = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "-") where !second && digits > 0:
                second = true
                digits = 0
                continue
            default: return false
            }
            // No leading zeros (make never writes them), so each value has one spelling.
            if digits > 0 && (second ? parts.1 : parts.0) == 0 { return false }
            let (m, o1) = (second ? parts.1 : parts.0).multipliedReportingOverflow(by: 36)
            let (v, o2) = m.addingReportingOverflow(UInt64(d))
            if o1 || o2 { return false }
            if second { parts.1 = v } else { parts.0 = v }
            digits += 1
        }
        guard digits > 0, parts.0 == lsn else { return false }
        // make writes no "-0" suffix: an index of 0 has none.
        return second ? parts.1 != 0 && parts.1 == UInt64(index) : index == 0
    }
}
