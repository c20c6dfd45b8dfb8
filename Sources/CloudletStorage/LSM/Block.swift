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

    /// The byte offset of restart point `i`.
    func restart(_ i: Int) -> Int { Int(contents.loadLE(UInt32.self, at: restartsStart + 4 * i)) }

    /// One decoded entry: its full key, where its value lies in ``contents``, and where the next entry starts.
    struct Entry {
        var key: [UInt8]
        var value: Range<Int>
        var next: Int
    }

    /// Decodes the entry at `offset`, whose key shares a prefix with `previousKey`.
    func entry(at offset: Int, previousKey: [UInt8]) throws(Defect) -> Entry {
        var at = offset
        let shared = try varint(&at)
        let unshared = try varint(&at)
        let valueLength = try varint(&at)
        guard shared <= previousKey.count else { throw Defect("entry at \(offset) shares more than the previous key") }
        guard unshared <= restartsStart - at, valueLength <= restartsStart - at - unshared else {
            throw Defect("entry at \(offset) runs past the entries")
        }
        var key = [UInt8]()
        key.reserveCapacity(shared + unshared)
        key += previousKey[0..<shared]
        key += contents[at..<(at + unshared)]
        at += unshared
        return Entry(key: key, value: at..<(at + valueLength), next: at + valueLength)
    }

    private func varint(_ at: inout Int) throws(Defect) -> Int {
        var result = 0
        var shift = 0
        while true {
            guard at < restartsStart else { throw Defect("entry at \(at) is cut off") }
            let b = contents[at]
            at += 1
            result |= Int(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
            guard shift <= 28 else { throw Defect("length varint at \(at) is too long") }
        }
    }

    /// The key of the entry at restart point `i` (which must share nothing).
    func restartKey(_ i: Int) throws(Defect) -> [UInt8] {
        let offset = restart(i)
        var at = offset
        guard try varint(&at) == 0 else { throw Defect("restart entry at \(offset) shares a prefix") }
        return try entry(at: offset, previousKey: []).key
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

    /// Positions at the first entry whose key is at least `target` (past the end if there is none).
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
            if LSMKey.compare(try block.restartKey(mid), target) < 0 { lo = mid } else { hi = mid - 1 }
        }
        current = try block.entry(at: block.restart(lo), previousKey: [])
        while let c = current, LSMKey.compare(c.key, target) < 0 { try advance() }
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
