/// Counting the live keys of a range without making an ``LSMEntry`` of each: what a count answered from an index
/// (`Database.count`) reads. The general iterators (``MergingIterator`` over ``LevelIterator``s and
/// ``MemtableIterator``s) hand every entry out as a value with its own key and value arrays, through three layers of
/// existential calls; a count needs none of that, only the order of keys. Here each source is a ``KeyWalk`` holding
/// one key buffer that it rewrites in place from the block's bytes (a run) or that points at the entry's key (a
/// memtable part), and the merge compares those buffers: no allocation a step.
extension LSMReadView {
    /// How many live keys `range` holds (at most `limit`): keys whose newest entry is a value, tombstones and the
    /// older entries they hide left out — what ``scan(_:limit:)`` would return, counted.
    ///
    /// Every block read is checked as any read checks it (checksum, structure, keys increasing); a damaged run throws
    /// `corruption` naming it.
    public func count(_ range: LSMKeyRange = .all, limit: Int = .max) throws -> Int {
        var walks: [KeyWalk] = []
        for memtable in memtables {
            for part in memtable.sortedParts() {
                let walk = TableKeyWalk(part, range)
                if !walk.done { walks.append(walk) }
            }
        }
        // Level 0 newest first, then each level as one source: the sources in the order of their age, newest first,
        // which decides equal keys with equal sequences.
        for run in level0 where Self.overlaps(run.metadata, range) {
            let walk = try RunKeyWalk([run], range)
            if !walk.done { walks.append(walk) }
        }
        for level in levels {
            let runs = level.filter { Self.overlaps($0.metadata, range) }
            guard !runs.isEmpty else { continue }
            let walk = try RunKeyWalk(runs, range)
            if !walk.done { walks.append(walk) }
        }
        return try Self.countMerged(walks, limit: limit)
    }

    /// Whether a run's key range meets `range`.
    static func overlaps(_ m: LSMRunMetadata, _ range: LSMKeyRange) -> Bool {
        if let upper = range.upper, LSMKey.compare(m.smallestKey, upper) >= 0 { return false }
        if let lower = range.lower, LSMKey.compare(m.largestKey, lower) < 0 { return false }
        return true
    }

    /// Merges `walks` (positioned, newest source first) by key and counts the keys whose winning entry — the
    /// highest sequence, the newest source on a tie — is a value.
    ///
    /// Each step remembers the walk standing on the next smaller key after the winner's (the runner-up): when the
    /// winner is alone on its key, advancing it and comparing its new key with the runner-up's is enough while it
    /// stays below; only when it does not are all the walks compared again.
    static func countMerged(_ walks: [KeyWalk], limit: Int) throws -> Int {
        var n = 0
        var winner = -1
        var runnerUp = -1
        var holders: [Int] = []
        holders.reserveCapacity(walks.count)

        func settle() throws {
            winner = -1
            runnerUp = -1
            holders.removeAll(keepingCapacity: true)
            for i in walks.indices where !walks[i].done {
                guard winner >= 0 else {
                    winner = i
                    holders.append(i)
                    continue
                }
                let c = LSMKey.compare(walks[i].key, walks[winner].key)
                if c < 0 {
                    runnerUp = winner
                    winner = i
                    holders.removeAll(keepingCapacity: true)
                    holders.append(i)
                } else if c == 0 {
                    holders.append(i)
                    if try walks[i].sequence() > walks[winner].sequence() { winner = i }
                } else if runnerUp < 0 || LSMKey.compare(walks[i].key, walks[runnerUp].key) < 0 {
                    runnerUp = i
                }
            }
        }

        try settle()
        while winner >= 0, n < limit {
            if walks[winner].isValue { n += 1 }
            if holders.count == 1 {
                let w = walks[winner]
                try w.advance()
                if !w.done, runnerUp < 0 || LSMKey.compare(w.key, walks[runnerUp].key) < 0 { continue }
            } else {
                for h in holders { try walks[h].advance() }
            }
            try settle()
        }
        return n
    }
}

/// One source's keys in a range, in order, for ``LSMReadView/count(_:limit:)``: stands on a key (``key``, whether
/// its entry is a value) until ``done``. A walk is used by the one call that made it, never shared, so its state
/// opts out of Swift's dynamic exclusivity checks (`@exclusivity(unchecked)`), which showed in a count's profile.
class KeyWalk {
    /// The current key (meaningless once ``done``).
    @exclusivity(unchecked) final var key: [UInt8] = []
    /// Whether the current entry is a value (not a tombstone).
    @exclusivity(unchecked) final var isValue = false
    /// Past the range's end or the source's.
    @exclusivity(unchecked) final var done = false

    /// Moves to the next key (``done`` past the range).
    func advance() throws { fatalError("KeyWalk.advance is abstract") }

    /// The current entry's sequence (asked only when two sources stand on the same key).
    func sequence() throws -> UInt64 { fatalError("KeyWalk.sequence is abstract") }
}

/// The keys of one sorted memtable part (``Memtable/sortedParts()``) in a range: the part's entries between two
/// binary searches, so no step compares with the bound.
final class TableKeyWalk: KeyWalk {
    private let entries: [LSMEntry]
    @exclusivity(unchecked) private var i: Int
    private let end: Int

    init(_ entries: [LSMEntry], _ range: LSMKeyRange) {
        self.entries = entries
        i = range.lower.map { Memtable.lowerBound(entries, $0) } ?? 0
        end = range.upper.map { Memtable.lowerBound(entries, $0) } ?? entries.count
        super.init()
        settle()
    }

    private func settle() {
        guard i < end else {
            done = true
            key = []
            return
        }
        key = entries[i].key
        isValue = !entries[i].isTombstone
    }

    override func advance() throws {
        i += 1
        settle()
    }

    override func sequence() throws -> UInt64 { entries[i].sequence }
}

/// The keys of runs with disjoint key ranges (one level, or one level-0 run) in a range: the blocks' entries decoded
/// in place into one key buffer. Checks what ``SortedRunIterator`` checks of order (keys increase within a block
/// and across blocks and runs), each block's checksum and structure being checked when it is read.
final class RunKeyWalk: KeyWalk {
    private let runs: [LSMRunHandle]
    private let upper: [UInt8]?
    @exclusivity(unchecked) private var run = 0
    @exclusivity(unchecked) private var reader: SortedRunReader!
    @exclusivity(unchecked) private var index: SortedRunReader.RunIndex!
    @exclusivity(unchecked) private var blockIndex = 0
    @exclusivity(unchecked) private var block: Block!
    /// Where the current entry's value bytes lie in the block, and where the next entry starts.
    @exclusivity(unchecked) private var value = 0..<0
    @exclusivity(unchecked) private var next = 0
    /// Whether keys of this block must be compared with the range's upper bound (its separator is not below it).
    @exclusivity(unchecked) private var checkUpper = true

    /// `runs`: in key order, disjoint, each meeting `range`.
    init(_ runs: [LSMRunHandle], _ range: LSMKeyRange) throws {
        self.runs = runs
        upper = range.upper
        super.init()
        try open(run: 0, seekingTo: range.lower)
    }

    /// Opens run `r` and stands on its first key at least `lower` (its first key: nil), going on through the next
    /// runs while that leaves nothing.
    private func open(run r: Int, seekingTo lower: [UInt8]?) throws {
        var r = r
        var lower = lower
        while r < runs.count {
            run = r
            reader = try runs[r].reader()
            index = try reader.runIndex()
            let first = lower.map { SortedRunReader.blockIndex(for: $0, in: index.separators) } ?? 0
            if try load(block: first, seekingTo: lower) { return }
            lower = nil
            r += 1
        }
        done = true
    }

    /// Stands on the first entry at least `lower` (nil: the first) of block `i` or, if it has none, of the
    /// blocks after it in the run; false if none is left in the run.
    private func load(block i: Int, seekingTo lower: [UInt8]?) throws -> Bool {
        var i = i
        var lower = lower
        while i < index.handles.count {
            var c = BlockCursor(try reader.block(i))
            do throws(Block.Defect) {
                if let lower { try c.seek(lower) } else { try c.seekToFirst() }
            } catch { throw reader.defect(error, block: i) }
            if let e = c.current {
                // The first key of a block (or run) must follow the key the walk stood on.
                if !key.isEmpty && LSMKey.compare(e.key, key) <= 0 {
                    throw reader.defect(Block.Defect("block's first key does not follow the previous key"), block: i)
                }
                block = c.block
                blockIndex = i
                checkUpper = upper.map { LSMKey.compare(index.separators[i], $0) >= 0 } ?? false
                key = e.key
                value = e.value
                next = e.next
                try settle()
                return true
            }
            lower = nil
            i += 1
        }
        return false
    }

    /// Reads the current entry's kind; ends the walk at the upper bound.
    private func settle() throws {
        if checkUpper, let upper, LSMKey.compare(key, upper) >= 0 {
            done = true
            return
        }
        guard value.count >= 2, let kind = LSMEntry.Kind(rawValue: block.contents[value.lowerBound]) else {
            throw reader.defect(Block.Defect("entry \(LSMKey.printable(key)) is malformed"), block: blockIndex)
        }
        isValue = kind == .value
    }

    override func advance() throws {
        guard !done else { return }
        guard next < block.restartsStart else {
            if try load(block: blockIndex + 1, seekingTo: nil) { return }
            try open(run: run + 1, seekingTo: nil)
            return
        }
        let at = next
        do throws(Block.Defect) {
            let l = try block.layout(at: at, previousKeyCount: key.count)
            // Above the previous key only if its own bytes are above the rest of that one (as BlockCursor.seek checks).
            guard LSMKey.compare(block.contents[l.unshared], key[l.shared...]) > 0 else {
                throw Block.Defect("keys out of order at \(at)")
            }
            key.removeSubrange(l.shared...)
            key.append(contentsOf: block.contents[l.unshared])
            value = l.value
            next = l.next
        } catch { throw reader.defect(error, block: blockIndex) }
        try settle()
    }

    override func sequence() throws -> UInt64 {
        try reader.entry(key: key, value: block.contents[value], block: blockIndex).sequence
    }
}
