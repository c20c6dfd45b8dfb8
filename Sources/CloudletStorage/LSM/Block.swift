/// The contents of one block, read back (``BlockBuilder`` wrote them), and a cursor over its entries. Every read
/// is bounds-checked: malformed contents throw a ``SortedRunLayout/BlockDefect``, which the run reader turns into a
/// corruption error naming the file and the block's offset.
struct Block: Sendable {
    typealias Defect = SortedRunLayout.BlockDefect

    let contents: [UInt8]
    /// Where the restart array starts (= where the entries end).
    let restartsStart: Int
    let restartCount: Int

    init(_ contents: [UInt8]) throws(Defect) {
        guard contents.count >= 4 else { throw Defect("block of \(contents.count) bytes has no restart count") }
        let count = Int(contents.loadLE(UInt32.self, at: contents.count - 4))
        guard count <= (contents.count - 4) / 4 else { throw Defect("restart count \(count) does not fit the block") }
        restartsStart = contents.count - 4 - 4 * count
        restartCount = count
        self.contents = contents
        var previous = -1
        for i in 0..<count {
            let r = restart(i)
            guard r > previous, r < restartsStart, i > 0 || r == 0 else {
                throw Defect("restart point \(i) at \(r) is out of order or outside the entries")
            }
            previous = r
        }
        guard count > 0 || restartsStart == 0 else { throw Defect("entries without a restart point") }
    }

    /// A block whose contents a ``init(_:)`` has checked before (one kept in the block cache, which holds only
    /// checked blocks): the restart array is not walked again.
    init(checked contents: [UInt8]) {
        restartCount = Int(contents.loadLE(UInt32.self, at: contents.count - 4))
        restartsStart = contents.count - 4 - 4 * restartCount
        self.contents = contents
    }

    /// The byte offset of restart point `i`.
    func restart(_ i: Int) -> Int { Int(contents.loadLE(UInt32.self, at: restartsStart + 4 * i)) }

    /// One decoded entry: its full key, where its value lies in ``contents``, and where the next entry starts.
    struct Entry {
        var key: [UInt8]
        var value: Range<Int>
        var next: Int
    }

    /// Where the parts of the entry at `offset` lie: how much of the previous key (of `previousKeyCount` bytes) its
    /// key shares, the rest of its key and its value in ``contents``, and where the next entry starts.
    struct EntryLayout {
        var shared: Int
        var unshared: Range<Int>
        var value: Range<Int>
        var next: Int { value.upperBound }
    }

    func layout(at offset: Int, previousKeyCount: Int) throws(Defect) -> EntryLayout {
        try contents.withUnsafeBufferPointer { bytes throws(Defect) in
            try Self.layout(bytes, entriesEnd: restartsStart, at: offset, previousKeyCount: previousKeyCount)
        }
    }

    /// ``layout(at:previousKeyCount:)`` in a block's bytes that the caller holds (a walk reading entry after entry),
    /// the entries ending at `entriesEnd`: every read checked against it, none against the array's bounds again.
    @inline(__always)
    static func layout(
        _ bytes: UnsafeBufferPointer<UInt8>, entriesEnd: Int, at offset: Int, previousKeyCount: Int
    ) throws(Defect) -> EntryLayout {
        var at = offset
        let shared = try varint(bytes, &at, end: entriesEnd)
        let unshared = try varint(bytes, &at, end: entriesEnd)
        let valueLength = try varint(bytes, &at, end: entriesEnd)
        guard shared <= previousKeyCount else { throw Defect("entry at \(offset) shares more than the previous key") }
        guard unshared <= entriesEnd - at, valueLength <= entriesEnd - at - unshared else {
            throw Defect("entry at \(offset) runs past the entries")
        }
        return EntryLayout(shared: shared, unshared: at..<(at + unshared), value: (at + unshared)..<(at + unshared + valueLength))
    }

    /// Decodes the entry at `offset`, whose key shares a prefix with `previousKey`.
    func entry(at offset: Int, previousKey: [UInt8]) throws(Defect) -> Entry {
        let l = try layout(at: offset, previousKeyCount: previousKey.count)
        var key = [UInt8]()
        key.reserveCapacity(l.shared + l.unshared.count)
        key += previousKey[0..<l.shared]
        key += contents[l.unshared]
        return Entry(key: key, value: l.value, next: l.next)
    }

    /// A length varint at `at` (moved past it), read before `end` (`end` ≤ `bytes.count`).
    @inline(__always)
    private static func varint(_ bytes: UnsafeBufferPointer<UInt8>, _ at: inout Int, end: Int) throws(Defect) -> Int {
        var result = 0
        var shift = 0
        while true {
            guard at < end else { throw Defect("entry at \(at) is cut off") }
            let b = bytes[at]
            at += 1
            result |= Int(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
            guard shift <= 28 else { throw Defect("length varint at \(at) is too long") }
        }
    }

    /// Where the key of the entry at restart point `i` (which must share nothing) lies in ``contents``.
    func restartKey(_ i: Int) throws(Defect) -> Range<Int> {
        let offset = restart(i)
        let l = try layout(at: offset, previousKeyCount: 0)
        guard l.shared == 0 else { throw Defect("restart entry at \(offset) shares a prefix") }
        return l.unshared
    }
}

/// A position in a ``Block``: the current entry, or past the end.
struct BlockCursor {
    let block: Block
    private(set) var current: Block.Entry?

    init(_ block: Block) { self.block = block }

    var key: [UInt8] { current!.key }
    var value: ArraySlice<UInt8> { block.contents[current!.value] }

    mutating func seekToFirst() throws(Block.Defect) {
        current = block.restartCount == 0 ? nil : try block.entry(at: 0, previousKey: [])
    }

    /// Positions at the first entry whose key is at least `target` (past the end if there is none). The restart
    /// keys are compared where they lie, and the scan from the chosen restart point rebuilds keys in one buffer: the
    /// only key made is the one it stops at.
    mutating func seek(_ target: [UInt8]) throws(Block.Defect) {
        guard block.restartCount > 0 else {
            current = nil
            return
        }
        // The last restart point whose key is below the target; the scan starts there.
        var lo = 0
        var hi = block.restartCount - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if LSMKey.compare(block.contents[try block.restartKey(mid)], target) < 0 { lo = mid } else { hi = mid - 1 }
        }
        var at = block.restart(lo)
        var key: [UInt8] = []
        key.reserveCapacity(target.count + 16)
        var first = true
        while true {
            // The restart entry shares nothing (the empty buffer allows nothing); each later key, sharing `shared`
            // bytes with the previous one, is above it only if its own bytes are above the rest of that one.
            let l = try block.layout(at: at, previousKeyCount: key.count)
            if !first && LSMKey.compare(block.contents[l.unshared], key[l.shared...]) <= 0 {
                throw Block.Defect("keys out of order at \(at)")
            }
            first = false
            key.removeSubrange(l.shared...)
            key += block.contents[l.unshared]
            if LSMKey.compare(key, target) >= 0 {
                current = Block.Entry(key: key, value: l.value, next: l.next)
                return
            }
            guard l.next < block.restartsStart else {
                current = nil
                return
            }
            at = l.next
        }
    }

    /// Moves to the next entry, or past the end.
    mutating func advance() throws(Block.Defect) {
        guard let c = current else { return }
        if c.next >= block.restartsStart {
            current = nil
            return
        }
        let next = try block.entry(at: c.next, previousKey: c.key)
        guard LSMKey.compare(next.key, c.key) > 0 else { throw Block.Defect("keys out of order at \(c.next)") }
        current = next
    }
}
