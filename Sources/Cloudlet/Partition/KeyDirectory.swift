import CloudletCore
import CloudletStorage

/// What the key directory knows of one zone besides its records: kept in memory (one per zone, not per record) and
/// written with every flush.
package struct ZoneSummary: Sendable, Hashable {
    /// LSN of the zone's creation (0 for a default zone, which always exists): the zone's incarnation.
    package var createdLSN: UInt64
    /// LSN of the zone's last change (creation included).
    package var lastChangeLSN: UInt64
    /// Records that exist (entries that are not tombstones).
    package var liveCount: Int
    /// Entries, tombstones included.
    package var entryCount: Int
    /// Elements of the change index: one per entry (a superseded change is deleted with the version it named).
    package var changeIndexCount: Int { entryCount }

    init(createdLSN: UInt64) {
        self.createdLSN = createdLSN
        lastChangeLSN = createdLSN
        liveCount = 0
        entryCount = 0
    }
}

/// One partition's key directory: per zone, record name → ``RecordEntry`` (where the latest version lives, its
/// change point and so its change tag, its type and time), the DELETE_SELF reverse index, the **change index** —
/// every current change in change order, which change feeds page through with ``changes(in:after:)`` — and, over
/// all zones, the tombstones in LSN order (what a purge drops).
///
/// An LSM tree (docs/index-layer.md): the newest writes are in ``Memtable``s held here — values with free copies,
/// so a copy of the directory (a ``PartitionReadView``) is O(1) and never changes — and everything flushed is in
/// the partition's ``LSMTree`` of sorted runs on disk, read through ``base`` (a view of the runs that pins their
/// files). Only the per-zone ``ZoneSummary``s are in memory besides. The partition's writer flushes: it
/// ``freeze(state:sequence:)``s the memtable (which goes on being read while it is written), writes it with
/// ``LSMTree/flush(_:logPosition:)``, and hands the new runs over with ``flushed(base:)``.
///
/// Reads that reach the runs do I/O and throw (a damaged run is named, never answered from). Enumerations are in
/// key order: ``entries(in:)`` by record name, ``changes(in:after:)`` by change point.
///
/// Keys (every number big-endian so that byte order is numeric order; `zone` is the zone's commit encoding,
/// length-prefixed fields, so no zone's keys are a prefix of another's):
/// - `0x01 · zone · 0x00 · name` → the encoded ``RecordEntry`` (``DirectoryCodec``);
/// - `0x01 · zone · 0x01 · lsn(8) · index(4)` → name: the change index;
/// - `0x01 · zone · 0x02 · u32 length · target · source` → empty: `source` references `target` with DELETE_SELF;
/// - `0x01 · zone · 0x03 · u32 length · type · name` → empty: the type index (live records by type, in name order);
/// - `0x01 · zone · 0x04 …` and `0x01 · zone · 0x05 …`: the secondary indexes' keys and stored values
///   (``IndexKeyspace``), written through the secondary-index section below;
/// - `0x02 · lsn(8) · index(4)` → `zone · name`: a tombstone, for purges;
/// - `0x03` → the partition's state besides the directory (``PartitionState/encodeState()``), written at each flush.
package struct KeyDirectory: Sendable {
    private var memtable = Memtable()
    /// The memtable being written to a run (between ``freeze(state:sequence:)`` and ``flushed(base:)``).
    private var flushing: Memtable?
    /// The flushed runs (nil: none, a directory kept in memory only).
    private var base: LSMReadView?
    private var summaries: [ZoneKey: ZoneSummary] = [:]

    package init() {}

    /// A directory over the runs of `base`, with the zone summaries of the state flushed with them.
    init(base: LSMReadView?, summaries: [ZoneKey: ZoneSummary]) {
        self.base = base
        self.summaries = summaries
    }

    // MARK: - Reading

    /// The record's current entry (a version or a tombstone); nil if the directory has none (never written, or
    /// its tombstone purged, or its zone gone).
    package func entry(_ z: ZoneKey, _ name: String) throws -> RecordEntry? {
        guard summaries[z] != nil else { return nil }
        return try entry(zone: DirectoryKey.zone(z), name)
    }

    /// ``entry(_:_:)`` when memory answers it, without I/O: `.some` of the entry (nil: none) when the record's key is
    /// in a memtable, its zone is not held or nothing is flushed; nil when only the runs can tell (a lookup that may
    /// read the disk).
    package func entryInMemory(_ z: ZoneKey, _ name: String) throws -> RecordEntry?? {
        guard summaries[z] != nil else { return .some(nil) }
        let key = DirectoryKey.entry(DirectoryKey.zone(z), name)
        guard let e = memtable.get(key) ?? flushing?.get(key) else { return base == nil ? .some(nil) : nil }
        return .some(e.isTombstone ? nil : try DirectoryCodec.decodeEntry(e.value))
    }

    /// ``entry(_:_:)`` of a zone held, by its key prefix.
    private func entry(zone: [UInt8], _ name: String) throws -> RecordEntry? {
        guard let e = try lookup(DirectoryKey.entry(zone, name)) else { return nil }
        return try DirectoryCodec.decodeEntry(e)
    }

    /// Whether the directory holds the zone (a default zone is held once written to).
    package func contains(_ z: ZoneKey) -> Bool { summaries[z] != nil }

    /// The zone's summary; nil if the directory does not hold it.
    package func zone(_ z: ZoneKey) -> ZoneSummary? { summaries[z] }

    /// The zones held, in no particular order.
    package var zoneKeys: some Collection<ZoneKey> { summaries.keys }

    /// How many zones are held.
    package var zoneCount: Int { summaries.count }

    /// Records that exist, over every zone.
    package var liveCount: Int { summaries.values.reduce(0) { $0 + $1.liveCount } }

    /// The zone's entries (tombstones included) in name order, from the first name after `after` (nil: from the
    /// first); empty for a zone not held. Does not copy.
    package func entries(in z: ZoneKey, after: String? = nil) -> Entries {
        guard summaries[z] != nil else { return Entries(view: nil, range: .all, count: 0) }
        let prefix = DirectoryKey.zone(z) + [DirectoryKey.entryTag]
        var lower = prefix
        if let after { lower += Array(after.utf8) + [0] }
        return Entries(view: view(), range: LSMKeyRange(lower: lower, upper: DirectoryKey.successor(prefix)), count: summaries[z]!.entryCount)
    }

    /// The zone's current changes after `point`, in change order: each record at most once, at its current
    /// version or tombstone.
    package func changes(in z: ZoneKey, after point: ChangePoint) -> Changes {
        guard summaries[z] != nil else { return Changes(directory: self, zone: z, view: nil, range: .all) }
        let zone = DirectoryKey.zone(z)
        let prefix = zone + [DirectoryKey.changeTag]
        var lower = DirectoryKey.change(zone, point)
        lower.append(0)  // just past `point`
        return Changes(directory: self, zone: z, view: view(), range: LSMKeyRange(lower: lower, upper: DirectoryKey.successor(prefix)))
    }

    /// Names of the records in the zone that reference `target` with DELETE_SELF.
    package func deleteSelfSources(in z: ZoneKey, referencing target: String) throws -> Set<String> {
        guard summaries[z] != nil else { return [] }
        return Set(try names(under: DirectoryKey.referencePrefix(DirectoryKey.zone(z), target)))
    }

    /// The names of the live records of type `type` in zone `z`, in name order (the type index).
    package func names(ofType type: String, in z: ZoneKey) throws -> [String] {
        guard summaries[z] != nil else { return [] }
        return try names(under: DirectoryKey.typePrefix(DirectoryKey.zone(z), type))
    }

    /// The key suffixes (record names) of the keys under `prefix` whose values are empty markers, in key order.
    private func names(under prefix: [UInt8]) throws -> [String] {
        var out: [String] = []
        var cursor = RangeCursor(view(), LSMKeyRange(lower: prefix, upper: DirectoryKey.successor(prefix)))
        while let e = try cursor.next() { out.append(String(decoding: e.key[prefix.count...], as: UTF8.self)) }
        return out
    }

    /// Every tombstone with LSN ≤ `through`, oldest first: its zone, name, LSN and deletion time.
    func tombstones(through: UInt64) throws -> [(zone: ZoneKey, name: String, point: ChangePoint, time: Int64)] {
        var out: [(zone: ZoneKey, name: String, point: ChangePoint, time: Int64)] = []
        try forEachTombstone { z, name, point, time in
            guard point.lsn <= through else { return false }
            out.append((z, name, point, time))
            return true
        }
        return out
    }

    /// Calls `body` with each tombstone (zone, name, change point, deletion time), oldest first, while it returns
    /// true.
    func forEachTombstone(_ body: (ZoneKey, String, ChangePoint, Int64) throws -> Bool) throws {
        let it = view().makeIterator()
        try it.seek([DirectoryKey.tombstoneSpace])
        while let e = it.current, e.key.first == DirectoryKey.tombstoneSpace {
            let (z, name, time) = try DirectoryCodec.decodeTombstone(e.value)
            guard try body(z, name, DirectoryKey.changePoint(e.key), time) else { return }
            try it.advance()
        }
    }

    /// The state written with the last flush (``PartitionState/encodeState()``), if any.
    func flushedState() throws -> [UInt8]? { try base?.get(DirectoryKey.state) }

    /// The memtables and the runs: what an enumeration reads.
    private func view() -> LSMReadView {
        LSMReadView(memtables: flushing.map { [memtable, $0] } ?? [memtable], over: base)
    }

    /// The newest value of `key` (nil: none or deleted): the memtables, then the runs.
    private func lookup(_ key: [UInt8]) throws -> [UInt8]? {
        let hash = KeyHash.hash(key)
        if let e = memtable.get(key, hash: hash) ?? flushing?.get(key, hash: hash) { return e.isTombstone ? nil : e.value }
        guard let base, let e = try base.entry(key, hash: hash), !e.isTombstone else { return nil }
        return e.value
    }

    /// A zone's entries in name order: a view of the directory, not a copy.
    package struct Entries: DirectorySequence {
        fileprivate let view: LSMReadView?
        fileprivate let range: LSMKeyRange
        /// Entries in the whole zone (not only after the starting name).
        package let count: Int

        package var isEmpty: Bool { count == 0 }

        package func makeIterator() -> Iterator { Iterator(entries: self) }

        package struct Iterator: DirectoryIterator {
            private var cursor: RangeCursor

            fileprivate init(entries: Entries) { cursor = RangeCursor(entries.view, entries.range) }

            /// The next entry, nil after the last.
            package mutating func next() throws -> (name: String, entry: RecordEntry)? {
                guard let e = try cursor.next() else { return nil }
                let prefixCount = cursor.range.upper!.count  // zone prefix and tag: the successor has the same length
                return (String(decoding: e.key[prefixCount...], as: UTF8.self), try DirectoryCodec.decodeEntry(e.value))
            }
        }
    }

    /// A zone's current changes from some point on, in change order.
    package struct Changes: DirectorySequence {
        fileprivate let directory: KeyDirectory
        fileprivate let zone: ZoneKey
        fileprivate let view: LSMReadView?
        fileprivate let range: LSMKeyRange

        package func makeIterator() -> Iterator { Iterator(changes: self) }

        package struct Iterator: DirectoryIterator {
            private let changes: Changes
            private var cursor: RangeCursor

            fileprivate init(changes: Changes) {
                self.changes = changes
                cursor = RangeCursor(changes.view, changes.range)
            }

            /// The next change, nil after the last.
            package mutating func next() throws -> (name: String, entry: RecordEntry)? {
                while true {
                    guard let e = try cursor.next() else { return nil }
                    let name = String(decoding: e.value, as: UTF8.self)
                    // The change index holds current changes only; the check guards against a damaged one.
                    let point = DirectoryKey.changePoint(e.key)
                    if let entry = try changes.directory.entry(changes.zone, name), entry.change == point { return (name, entry) }
                }
            }
        }
    }

    // MARK: - Writing (PartitionState.apply, compaction's moves, checkpoint loading)

    /// Creates the zone at `lsn` unless it is held; returns whether it did.
    mutating func createZone(_ z: ZoneKey, lsn: UInt64) -> Bool {
        guard summaries[z] == nil else { return false }
        summaries[z] = ZoneSummary(createdLSN: lsn)
        return true
    }

    /// Removes the zone at `lsn` (deleting every key it has); returns its entries (to free what they kept alive),
    /// nil if it was not held.
    mutating func removeZone(_ z: ZoneKey, lsn: UInt64) throws -> [RecordEntry]? {
        guard summaries[z] != nil else { return nil }
        let prefix = DirectoryKey.zone(z)
        var removed: [RecordEntry] = []
        let it = view().makeIterator()
        try it.seek(prefix)
        var keys: [[UInt8]] = []
        while let e = it.current, e.key.starts(with: prefix) {
            keys.append(e.key)
            if e.key.count > prefix.count, e.key[prefix.count] == DirectoryKey.entryTag {
                let entry = try DirectoryCodec.decodeEntry(e.value)
                if entry.deleted { keys.append(DirectoryKey.tombstone(entry.change)) }
                removed.append(entry)
            }
            try it.advance()
        }
        for key in keys { memtable.delete(key, sequence: lsn) }
        summaries[z] = nil
        return removed
    }

    /// Makes `entry` the record's current version; returns the one it replaces. A zone not held is created with
    /// incarnation 0 (a default zone).
    @discardableResult
    ///
    /// `known`: the record's current entry as the caller has just looked it up in this directory (the batch planner,
    /// under the same lock), which spares the lookup; nil: look it up.
    mutating func put(_ z: ZoneKey, _ name: String, _ entry: RecordEntry, known: RecordEntry?? = nil) throws -> RecordEntry? {
        let zone = DirectoryKey.zone(z)
        let previous = summaries[z] == nil ? nil : try known ?? self.entry(zone: zone, name)
        let seq = entry.lsn
        var summary = summaries[z] ?? ZoneSummary(createdLSN: 0)
        let typeKept = previous.map { !$0.deleted && !entry.deleted && $0.recordType == entry.recordType } ?? false
        if let old = previous {
            if !old.deleted && !typeKept { memtable.delete(DirectoryKey.type(zone, old.recordType, name), sequence: seq) }
            if !old.deleted { summary.liveCount -= 1 }
            memtable.delete(DirectoryKey.change(zone, old.change), sequence: seq)
            for t in old.deleteSelfTargets { memtable.delete(DirectoryKey.reference(zone, t, name), sequence: seq) }
            if old.deleted { memtable.delete(DirectoryKey.tombstone(old.change), sequence: seq) }
        } else {
            summary.entryCount += 1
        }
        if !entry.deleted { summary.liveCount += 1 }
        if !entry.deleted && !typeKept { memtable.put(DirectoryKey.type(zone, entry.recordType, name), [], sequence: seq) }
        memtable.put(DirectoryKey.entry(zone, name), DirectoryCodec.encode(entry), sequence: seq)
        memtable.put(DirectoryKey.change(zone, entry.change), Array(name.utf8), sequence: seq)
        for t in entry.deleteSelfTargets { memtable.put(DirectoryKey.reference(zone, t, name), [], sequence: seq) }
        if entry.deleted {
            memtable.put(DirectoryKey.tombstone(entry.change), DirectoryCodec.encodeTombstone(zone, name, entry.time), sequence: seq)
        }
        summary.lastChangeLSN = max(summary.lastChangeLSN, entry.lsn)
        summaries[z] = summary
        return previous
    }

    /// Drops every tombstone with LSN ≤ `through`, as of the purge at `lsn`; returns them. A default zone left
    /// without entries is dropped (as if never written to: a compacted log has nothing of it). When a zone's last
    /// change is among them, its last change becomes its newest remaining one (or its creation), which is what a
    /// replay of the compacted log — where those tombstones no longer exist — derives as well.
    mutating func purgeTombstones(through: UInt64, lsn: UInt64) throws -> [RecordEntry] {
        var dropped: [RecordEntry] = []
        var touched: Set<ZoneKey> = []
        for t in try tombstones(through: through) {
            memtable.delete(DirectoryKey.tombstone(t.point), sequence: lsn)
            guard let e = try entry(t.zone, t.name), e.deleted, e.change == t.point else { continue }
            let zone = DirectoryKey.zone(t.zone)
            memtable.delete(DirectoryKey.entry(zone, t.name), sequence: lsn)
            memtable.delete(DirectoryKey.change(zone, e.change), sequence: lsn)
            summaries[t.zone]!.entryCount -= 1
            touched.insert(t.zone)
            dropped.append(e)
        }
        for z in touched {
            if z.zoneName == ZoneID.defaultZoneName && summaries[z]!.entryCount == 0 {
                summaries[z] = nil
                continue
            }
            guard summaries[z]!.lastChangeLSN <= through else { continue }
            var last = summaries[z]!.createdLSN
            var it = changes(in: z, after: .zero).makeIterator()
            while let (_, e) = try it.next() { last = max(last, e.lsn) }
            summaries[z]!.lastChangeLSN = last
        }
        return dropped
    }

    /// Points the record's entry at a new place if it is still the version `change` (compaction moved it), as of
    /// `sequence` (the partition's last LSN).
    mutating func move(
        _ z: ZoneKey, _ name: String, _ change: ChangePoint, to position: FramePosition, slot: Commit.Slot, cost: UInt32,
        sequence: UInt64
    ) throws -> Bool {
        guard var e = try entry(z, name), e.change == change else { return false }
        e.position = position
        e.slot = slot
        e.cost = cost
        memtable.put(DirectoryKey.entry(DirectoryKey.zone(z), name), DirectoryCodec.encode(e), sequence: sequence)
        return true
    }

    /// Loads a zone from a checkpoint of a store of format 3 (whose checkpoints held the whole directory): its
    /// entries, and its summary's LSNs (the rest is derived).
    mutating func load(_ z: ZoneKey, createdLSN: UInt64, lastChangeLSN: UInt64, entries: [(name: String, entry: RecordEntry)]) throws {
        summaries[z] = ZoneSummary(createdLSN: createdLSN)
        for (name, e) in entries { try put(z, name, e) }
        summaries[z]!.lastChangeLSN = lastChangeLSN
    }

    // MARK: - Flushing

    /// Bytes the memtable holds (roughly what it takes in memory).
    var memtableBytes: Int { memtable.approximateBytes }

    /// Starts a flush: records `state` (the partition's state besides the directory, as of `sequence`) and sets
    /// the memtable aside to be written; later writes go to a fresh one. Returns the memtable to write.
    mutating func freeze(state: [UInt8], sequence: UInt64) -> Memtable {
        precondition(flushing == nil, "a flush is under way")
        memtable.put(DirectoryKey.state, state, sequence: sequence)
        flushing = memtable
        memtable = Memtable()
        return flushing!
    }

    /// The memtable set aside by ``freeze(state:sequence:)`` is in the runs of `base` now.
    mutating func flushed(base: LSMReadView) {
        flushing = nil
        self.base = base
    }

    /// A flush failed: the memtable set aside goes on being read from memory (it is not in any run).
    mutating func flushFailed() {
        guard let frozen = flushing else { return }
        // Keep it readable under the fresh memtable: merge the fresh writes on top of it.
        var merged = frozen
        let it = memtable.makeIterator()
        it.seekToFirst()
        while let e = it.current {
            merged.apply(e)
            it.advance()
        }
        memtable = merged
        flushing = nil
    }

    /// The runs changed under the directory (a merge): reads go to `base` from now on (same contents).
    mutating func rebase(_ base: LSMReadView) {
        guard flushing == nil else { return }
        self.base = base
    }

    /// The zone summaries, for the flushed state.
    var allSummaries: [ZoneKey: ZoneSummary] { summaries }

    // MARK: - Secondary indexes (IndexState.swift: written from PartitionState.apply and index builds)

    /// The value of a secondary-index key (``IndexKeyspace``), nil if it has none.
    func indexValue(_ key: [UInt8]) throws -> [UInt8]? { try lookup(key) }

    /// Writes a secondary-index key as of `sequence` (the commit's LSN; a build's: the partition's last LSN).
    mutating func putIndexKey(_ key: [UInt8], _ value: [UInt8], sequence: UInt64) { memtable.put(key, value, sequence: sequence) }

    /// Deletes a secondary-index key as of `sequence`.
    mutating func deleteIndexKey(_ key: [UInt8], sequence: UInt64) { memtable.delete(key, sequence: sequence) }

    /// How many live keys `range` holds, counting at most `limit`: a walk that makes no entry of each key
    /// (``LSMReadView/count(_:limit:)``).
    func countKeys(_ range: LSMKeyRange, limit: Int = .max) throws -> Int { try view().count(range, limit: limit) }

    /// A walk through the live keys of `range`, in key order or (`reverse`) backwards.
    func indexCursor(_ range: LSMKeyRange, reverse: Bool = false) -> KeyCursor { KeyCursor(view(), range, reverse: reverse) }

    /// A walk through one key range of the memtables and runs, either way, positioned at its first call.
    struct KeyCursor {
        let range: LSMKeyRange
        private var forward: RangeCursor?
        private let backward: MergingIterator?
        private var started = false

        fileprivate init(_ view: LSMReadView, _ range: LSMKeyRange, reverse: Bool) {
            self.range = range
            forward = reverse ? nil : RangeCursor(view, range)
            backward = reverse ? view.makeReverseIterator() : nil
        }

        /// The next live key in the range, nil after the last (forwards: the scan's buffer, to let go of before the
        /// next call).
        mutating func nextKey() throws -> [UInt8]? {
            guard backward != nil else { return try forward!.nextKey() }
            return try next()?.key
        }

        /// The next live key and its value (forwards: the scan's key buffer and the value where it lies, to let go
        /// of before the next call).
        mutating func nextKeyValue() throws -> (key: [UInt8], value: ArraySlice<UInt8>)? {
            guard backward != nil else { return try forward!.nextKeyValue() }
            return try next().map { ($0.key, $0.value[...]) }
        }

        /// Forwards only: makes the next call return the first live key at least `key` (or the one after the last
        /// returned, if that is further on).
        mutating func seek(_ key: [UInt8]) throws {
            precondition(backward == nil, "a backward cursor does not seek")
            try forward!.seek(key)
        }

        /// The next live entry in the range, nil after the last.
        mutating func next() throws -> LSMEntry? {
            guard let backward else { return try forward!.next() }
            if started {
                try backward.advance()
            } else {
                if let upper = range.upper { try backward.seek(upper) } else { try backward.seekToFirst() }
                started = true
            }
            guard let e = backward.current, range.contains(e.key) else { return nil }
            return e
        }
    }
}

/// What ``KeyDirectory/entries(in:after:)`` and ``KeyDirectory/changes(in:after:)`` return: (name, entry) pairs in
/// key order, read lazily from the memtables and runs, so each step may do I/O and throw.
package protocol DirectorySequence: Sendable {
    associatedtype Iterator: DirectoryIterator
    func makeIterator() -> Iterator
}

package protocol DirectoryIterator {
    mutating func next() throws -> (name: String, entry: RecordEntry)?
}

extension DirectorySequence {
    /// Calls `body` with each pair in order.
    package func forEach(_ body: (String, RecordEntry) throws -> Void) throws {
        var it = makeIterator()
        while let (name, e) = try it.next() { try body(name, e) }
    }

    /// The pairs, in order.
    package func all() throws -> [(name: String, entry: RecordEntry)] {
        var out: [(name: String, entry: RecordEntry)] = []
        try forEach { out.append(($0, $1)) }
        return out
    }
}

/// A walk through one key range of a read view, positioned at its first call: an ``LSMKeyScan``, which steps
/// without making an entry of each key (``nextKey()``) and seeks forward without stepping (``seek(_:)``).
struct RangeCursor {
    let range: LSMKeyRange
    private let view: LSMReadView?
    private var scan: LSMKeyScan?
    /// Whether the scan stands on the entry the next call returns (made or sought, not yet returned).
    private var pending = false

    init(_ view: LSMReadView?, _ range: LSMKeyRange) {
        self.range = range
        self.view = view
    }

    /// Moves to the next live key; false after the last.
    private mutating func step() throws -> Bool {
        if pending {
            pending = false
        } else if let scan {
            try scan.advance()
        } else if let view {
            scan = try view.makeKeyScan(range)
        } else {
            return false
        }
        return !scan!.done
    }

    /// The next live entry in the range, nil after the last.
    mutating func next() throws -> LSMEntry? { try step() ? try scan!.entry() : nil }

    /// The next live key in the range, nil after the last: the scan's own buffer, to let go of before the next call
    /// (or that call copies it).
    mutating func nextKey() throws -> [UInt8]? { try step() ? scan!.key : nil }

    /// ``nextKey()`` with the entry's value, in place (``LSMKeyScan/valueBytes()``).
    mutating func nextKeyValue() throws -> (key: [UInt8], value: ArraySlice<UInt8>)? {
        guard try step(), let key = scan!.key, let value = try scan!.valueBytes() else { return nil }
        return (key, value)
    }

    /// Makes the next call return the first live key at least `key`, or the one after the last returned if that is
    /// further on (the cursor never moves back).
    mutating func seek(_ key: [UInt8]) throws {
        if scan == nil {
            guard let view else { return }
            scan = try view.makeKeyScan(range)
            pending = true
        }
        guard let scan, !scan.done, scan.compareKey(with: key) < 0 else { return }
        try scan.seek(key)
        pending = true
    }
}

/// The directory's keys (see ``KeyDirectory``).
package enum DirectoryKey {
    static let zoneSpace: UInt8 = 0x01
    static let tombstoneSpace: UInt8 = 0x02
    package static let state: [UInt8] = [0x03]
    static let entryTag: UInt8 = 0x00
    static let changeTag: UInt8 = 0x01
    static let referenceTag: UInt8 = 0x02
    static let typeTag: UInt8 = 0x03

    /// `0x01 · zone`: the prefix of every key of the zone.
    static func zone(_ z: ZoneKey) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.u8(zoneSpace)
        Commit.encode(z, into: &w)
        return w.bytes
    }

    static func entry(_ zone: [UInt8], _ name: String) -> [UInt8] { zone + [entryTag] + Array(name.utf8) }

    static func change(_ zone: [UInt8], _ point: ChangePoint) -> [UInt8] {
        var key = zone
        key.append(changeTag)
        appendBE(&key, point.lsn, 8)
        appendBE(&key, UInt64(point.index), 4)
        return key
    }

    static func changePoint(_ key: [UInt8]) -> ChangePoint {
        let n = key.count
        return ChangePoint(lsn: loadBE(key, at: n - 12), index: UInt32(loadBE(key, at: n - 4, bytes: 4)))
    }

    /// `zone · tag · u32 length · string`: the prefix of the keys filed under one string (a reference target, a
    /// record type), length-prefixed so that no string's keys are a prefix of another's.
    private static func stringPrefix(_ zone: [UInt8], _ tag: UInt8, _ string: String) -> [UInt8] {
        var key = zone
        key.append(tag)
        appendBE(&key, UInt64(string.utf8.count), 4)
        key += string.utf8
        return key
    }

    static func referencePrefix(_ zone: [UInt8], _ target: String) -> [UInt8] { stringPrefix(zone, referenceTag, target) }

    static func reference(_ zone: [UInt8], _ target: String, _ source: String) -> [UInt8] {
        referencePrefix(zone, target) + Array(source.utf8)
    }

    static func typePrefix(_ zone: [UInt8], _ type: String) -> [UInt8] { stringPrefix(zone, typeTag, type) }

    static func type(_ zone: [UInt8], _ type: String, _ name: String) -> [UInt8] { typePrefix(zone, type) + Array(name.utf8) }

    static func tombstone(_ point: ChangePoint) -> [UInt8] {
        var key: [UInt8] = [tombstoneSpace]
        appendBE(&key, point.lsn, 8)
        appendBE(&key, UInt64(point.index), 4)
        return key
    }

    /// The smallest key greater than every key starting with `prefix` (nil-free: the directory's prefixes all have
    /// a byte below 0xFF — a space or tag byte at least — so trailing 0xFF bytes are dropped and the last other one
    /// incremented).
    static func successor(_ prefix: [UInt8]) -> [UInt8] {
        var s = prefix
        while let last = s.last, last == 0xFF { s.removeLast() }
        precondition(!s.isEmpty, "a directory key prefix has a byte below 0xFF")
        s[s.count - 1] += 1
        return s
    }

    static func appendBE(_ key: inout [UInt8], _ v: UInt64, _ bytes: Int) {
        for i in stride(from: bytes - 1, through: 0, by: -1) { key.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
    }

    static func loadBE(_ key: [UInt8], at offset: Int, bytes: Int = 8) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<bytes { v = v << 8 | UInt64(key[offset + i]) }
        return v
    }
}

/// The directory's values: a ``RecordEntry`` (docs/index-layer.md, "Entry value"), a tombstone's place.
enum DirectoryCodec {
    static func encode(_ e: RecordEntry) -> [UInt8] {
        var w = ByteWriter(capacity: 48 + e.recordType.utf8.count)
        w.u8(e.deleted ? 1 : 0)
        w.varint(e.lsn)
        w.varint(UInt64(e.index))
        w.svarint(e.time)
        w.string(e.recordType)
        w.varint(e.position.segment)
        w.varint(e.position.offset)
        w.varint(UInt64(e.position.length))
        w.varint(UInt64(e.cost))
        if !e.deleted {
            w.u8(e.slot.block ? 1 : 0)
            w.varint(UInt64(e.slot.offset))
            w.varint(UInt64(e.slot.length))
            if e.slot.block { w.varint(UInt64(e.slot.recordLength)) }
            w.varint(e.deleteSelfTargets.count)
            for t in e.deleteSelfTargets { w.string(t) }
            if let c = e.created {
                w.u8(1)
                RecordCodec.encode(c, into: &w)
            }
        } else if let p = e.parent {
            w.string(p)
        }
        return w.bytes
    }

    static func decodeEntry(_ bytes: [UInt8]) throws -> RecordEntry {
        var r = ByteReader(bytes, what: "key directory entry")
        let flags = try r.u8()
        guard flags <= 1 else { throw CloudletError.corruption("key directory entry: bad flags \(flags)") }
        let deleted = flags == 1
        let lsn = try r.varint()
        let index = try r.varint()
        let time = try r.svarint()
        let type = try r.string()
        let position = FramePosition(segment: try r.varint(), offset: try r.varint(), length: UInt32(truncatingIfNeeded: try r.varint()))
        let cost = UInt32(truncatingIfNeeded: try r.varint())
        var e = RecordEntry(
            lsn: lsn, index: UInt32(truncatingIfNeeded: index), position: position, slot: Commit.Slot(offset: 0, length: 0),
            recordType: type, deleted: deleted, time: time, deleteSelfTargets: [], cost: cost)
        if !deleted {
            let block = try r.u8() == 1
            let offset = UInt32(truncatingIfNeeded: try r.varint())
            let length = UInt32(truncatingIfNeeded: try r.varint())
            if block {
                e.slot = Commit.Slot(block: Int(offset)..<(Int(offset) + Int(length)), recordLength: try r.int())
            } else {
                e.slot = Commit.Slot(offset: offset, length: length)
            }
            let n = try r.length()
            for _ in 0..<n { e.deleteSelfTargets.append(try r.string()) }
            // Entries written by store format 4 end here.
            if !r.isAtEnd {
                let tag = try r.u8()
                guard tag == 1 else { throw CloudletError.corruption("key directory entry: bad creation stamp tag \(tag)") }
                e.created = try RecordCodec.decodeStamp(&r)
            }
        } else if !r.isAtEnd {
            e.parent = try r.string()  // a tombstone that kept its parent
        }
        guard r.isAtEnd else { throw CloudletError.corruption("key directory entry: \(r.remaining) trailing bytes") }
        return e
    }

    static func encodeTombstone(_ zone: [UInt8], _ name: String, _ time: Int64) -> [UInt8] {
        var w = ByteWriter(capacity: zone.count + name.utf8.count + 12)
        w.raw(zone.dropFirst())
        w.string(name)
        w.svarint(time)
        return w.bytes
    }

    static func decodeTombstone(_ bytes: [UInt8]) throws -> (ZoneKey, String, Int64) {
        var r = ByteReader(bytes, what: "key directory tombstone")
        let z = try Commit.decodeZone(&r)
        let name = try r.string()
        let time = try r.svarint()
        return (z, name, time)
    }
}
