import CloudletCore

/// A key's bytes in memory of its own, grown as needed and freed with it: what a walk stands on, and what a scan last
/// stepped past. A step rewrites it in place — the bytes after the part the next key shares with this one — and
/// nothing is reference-counted or checked for uniqueness, as an array's would be.
struct KeyBuffer: ~Copyable {
    private(set) var start: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity = 64

    init() { start = .allocate(capacity: capacity) }

    deinit { start.deallocate() }

    /// The bytes, valid until the next change.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: start, count: count) }

    /// Keeps the first `shared` bytes (at most ``count``) and puts `rest` after them.
    @inline(__always)
    mutating func replace(after shared: Int, with rest: UnsafeRawBufferPointer) {
        let n = shared + rest.count
        if n > capacity {
            capacity = max(n, 2 * capacity)
            let bigger = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            UnsafeMutableRawPointer(bigger).copyMemory(from: start, byteCount: shared)
            start.deallocate()
            start = bigger
        }
        if let from = rest.baseAddress { UnsafeMutableRawPointer(start + shared).copyMemory(from: from, byteCount: rest.count) }
        count = n
    }
}

/// One source's keys in a range, in order, for ``LSMKeyScan`` (scans and counts that make no ``LSMEntry`` a step):
/// stands on a key (``key``, whether its entry is a value) until ``done``. A walk is used by the one scan that made
/// it, never shared, so its state opts out of Swift's dynamic exclusivity checks (`@exclusivity(unchecked)`), which
/// showed in a count's profile.
class KeyWalk {
    /// The current key (meaningless once ``done``), rewritten in place a step.
    @exclusivity(unchecked) final private(set) var current = KeyBuffer()
    /// Whether the current entry is a value (not a tombstone).
    @exclusivity(unchecked) final var isValue = false
    /// Past the range's end or the source's.
    @exclusivity(unchecked) final var done = false

    /// The current key's bytes, valid until the walk moves.
    final var keyBytes: UnsafeRawBufferPointer { current.bytes }

    /// The current key, copied.
    final var key: [UInt8] { Array(keyBytes) }

    /// Keeps the key's first `shared` bytes and puts `rest` after them.
    @inline(__always)
    final func replaceKey(after shared: Int, with rest: UnsafeRawBufferPointer) { current.replace(after: shared, with: rest) }

    /// Makes `bytes` the key.
    final func setKey(_ bytes: [UInt8]) { bytes.withUnsafeBytes { replaceKey(after: 0, with: $0) } }

    /// Moves to the next key (``done`` past the range).
    func advance() throws { fatalError("KeyWalk.advance is abstract") }

    /// Moves forward to the first key at least `target` (``done`` if the range has none); stays if the current key
    /// is already there. Never moves back.
    func seek(_ target: [UInt8]) throws { fatalError("KeyWalk.seek is abstract") }

    /// The current entry, made whole (its key copied out, its value decoded).
    func entry() throws -> LSMEntry { fatalError("KeyWalk.entry is abstract") }

    /// The current value entry's value, where it lies (a block's bytes, a memtable entry's), not copied.
    func valueBytes() throws -> ArraySlice<UInt8> { fatalError("KeyWalk.valueBytes is abstract") }

    /// The current entry's sequence (asked only when two sources stand on the same key).
    func sequence() throws -> UInt64 { try entry().sequence }
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
            return
        }
        setKey(entries[i].key)
        isValue = !entries[i].isTombstone
    }

    override func advance() throws {
        i += 1
        settle()
    }

    override func seek(_ target: [UInt8]) throws {
        guard !done, LSMKey.compare(keyBytes, target) < 0 else { return }
        // The first entry at least `target`, searched for among those after the current one.
        var lo = i + 1
        var hi = end
        while lo < hi {
            let mid = (lo + hi) / 2
            if LSMKey.compare(entries[mid].key, target) < 0 { lo = mid + 1 } else { hi = mid }
        }
        i = lo
        settle()
    }

    override func entry() throws -> LSMEntry { entries[i] }

    override func valueBytes() throws -> ArraySlice<UInt8> { entries[i].value[...] }

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
            let first = lower.map { index.separators.firstAtLeast($0) } ?? 0
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
                if !keyBytes.isEmpty && LSMKey.compare(e.key, keyBytes) <= 0 {
                    throw reader.defect(Block.Defect("block's first key does not follow the previous key"), block: i)
                }
                block = c.block
                blockIndex = i
                checkUpper = upper.map { index.separators.compare(i, $0) >= 0 } ?? false
                setKey(e.key)
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
        if checkUpper, let upper, LSMKey.compare(keyBytes, upper) >= 0 {
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
        let end = block.restartsStart
        do throws(Block.Defect) {
            // The block's bytes held once for the step: no slice of the array made, nothing retained.
            try block.contents.withUnsafeBufferPointer { bytes throws(Block.Defect) in
                let l = try Block.layout(bytes, entriesEnd: end, at: at, previousKeyCount: keyBytes.count)
                let rest = UnsafeRawBufferPointer(start: bytes.baseAddress! + l.unshared.lowerBound, count: l.unshared.count)
                // Above the previous key only if its own bytes are above the rest of that one (as BlockCursor.seek checks).
                guard LSMKey.compare(rest, UnsafeRawBufferPointer(rebasing: keyBytes[l.shared...])) > 0 else {
                    throw Block.Defect("keys out of order at \(at)")
                }
                replaceKey(after: l.shared, with: rest)
                value = l.value
                next = l.next
            }
        } catch { throw reader.defect(error, block: blockIndex) }
        try settle()
    }

    override func seek(_ target: [UInt8]) throws {
        guard !done, LSMKey.compare(keyBytes, target) < 0 else { return }
        if index.separators.compare(blockIndex, target) >= 0 {
            // In this block (its separator is at least every key in it): stepping on in place reaches it.
            while !done, LSMKey.compare(keyBytes, target) < 0 { try advance() }
            return
        }
        // A later block of this run (a binary search of its separators), or of a later run.
        if LSMKey.compare(target, runs[run].metadata.largestKey) <= 0 {
            if try load(block: index.separators.firstAtLeast(target, from: blockIndex + 1), seekingTo: target) { return }
            try open(run: run + 1, seekingTo: nil)
            return
        }
        var lo = run + 1
        var hi = runs.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if LSMKey.compare(runs[mid].metadata.largestKey, target) < 0 { lo = mid + 1 } else { hi = mid }
        }
        try open(run: lo, seekingTo: target)
    }

    override func entry() throws -> LSMEntry {
        try reader.entry(key: key, value: block.contents[value], block: blockIndex)
    }

    override func valueBytes() throws -> ArraySlice<UInt8> {
        // After the kind byte and the sequence; a malformed entry is named by the entry's decoding.
        var at = value.lowerBound + 1
        guard ByteReader.varint(block.contents[value], at: &at) != nil else { return try entry().value[...] }
        return block.contents[at..<value.upperBound]
    }

    override func sequence() throws -> UInt64 {
        // The varint after the kind byte (settle checked that there is one), read in place.
        var at = value.lowerBound + 1
        if let sequence = ByteReader.varint(block.contents[value], at: &at) { return sequence }
        return try entry().sequence  // malformed: the entry's decoding names the run
    }
}
