/// Reverse iterators are ``LSMIterator``s whose keys decrease: ``LSMIterator/seek(_:)`` positions at the last entry
/// whose key is *below* the key, ``LSMIterator/seekToFirst()`` at the last entry, ``LSMIterator/advance()`` moves to
/// the previous entry — what a read walking a key range backwards uses (a query sorted descending by an indexed
/// field). A ``MergingIterator`` with `descending` merges them.
extension LSMReadView {
    /// A merged iterator walking every live (not deleted) key backwards, newest values; not positioned yet.
    public func makeReverseIterator() -> MergingIterator {
        let children: [any LSMIterator] =
            memtables.map { MemtableReverseIterator($0.sortedParts()) } + level0.map { LevelIterator([$0], descending: true) }
            + levels.map { LevelIterator($0, descending: true) }
        return MergingIterator(children, dropTombstones: true, descending: true)
    }
}

/// A memtable walked backwards: its sorted parts (``Memtable/sortedParts()``), the newest part's entry winning for a
/// key several parts hold. Tombstones are returned like values.
final class MemtableReverseIterator: LSMIterator {
    private let parts: [[LSMEntry]]
    /// Per part, the index of its current entry (-1: before its first).
    private var positions: [Int]
    private(set) var current: LSMEntry?

    init(_ parts: [[LSMEntry]]) {
        self.parts = parts
        positions = Array(repeating: -1, count: parts.count)
    }

    func seekToFirst() {
        for p in parts.indices { positions[p] = parts[p].count - 1 }
        settle()
    }

    /// Positions at the last entry whose key is below `key`.
    func seek(_ key: [UInt8]) {
        for (p, entries) in parts.enumerated() { positions[p] = Memtable.lowerBound(entries, key) - 1 }
        settle()
    }

    /// Moves to the previous entry.
    func advance() {
        guard let key = current?.key else { return }
        for p in parts.indices where positions[p] >= 0 && parts[p][positions[p]].key == key { positions[p] -= 1 }
        settle()
    }

    /// Makes ``current`` the largest key's entry from the newest part that has it.
    private func settle() {
        var winner: LSMEntry?
        for p in parts.indices where positions[p] >= 0 {
            let entry = parts[p][positions[p]]
            if let w = winner, LSMKey.compare(entry.key, w.key) <= 0 { continue }
            winner = entry
        }
        current = winner
    }
}

/// One run's entries backwards. A block is decoded whole when the walk enters it (blocks are small, and their
/// prefix-compressed entries can only be decoded forwards); keys are checked to decrease across blocks and to stay
/// within their block's separator, as ``SortedRunIterator`` checks them forwards.
final class SortedRunReverseIterator: LSMIterator {
    private let reader: SortedRunReader
    private var blockIndex = -1
    /// The current block's entries (key, value bytes), in key order.
    private var entries: [([UInt8], ArraySlice<UInt8>)] = []
    private var position = -1
    private(set) var current: LSMEntry?

    init(_ reader: SortedRunReader) { self.reader = reader }

    func seekToFirst() throws { try load(block: try reader.runIndex().handles.count - 1, before: nil) }

    /// Positions at the last entry whose key is below `key`.
    func seek(_ key: [UInt8]) throws {
        let index = try reader.runIndex()
        let i = min(index.separators.firstAtLeast(key), index.handles.count - 1)
        try load(block: i, before: key)
    }

    /// Moves to the previous entry.
    func advance() throws {
        guard let c = current else { return }
        if position > 0 {
            position -= 1
            try settle()
        } else {
            try load(block: blockIndex - 1, before: c.key)
        }
    }

    /// Positions at the last entry of block `i` whose key is below `key` (nil: its last), moving on to the blocks
    /// before while there is none.
    private func load(block i: Int, before key: [UInt8]?) throws {
        var i = i
        while i >= 0 {
            var c = BlockCursor(try reader.block(i))
            var decoded: [([UInt8], ArraySlice<UInt8>)] = []
            do throws(Block.Defect) {
                try c.seekToFirst()
                while c.current != nil {
                    decoded.append((c.key, c.value))
                    try c.advance()
                }
            } catch { throw reader.defect(error, block: i) }
            var n = decoded.count
            if let key {
                while n > 0 && LSMKey.compare(decoded[n - 1].0, key) >= 0 { n -= 1 }
            }
            if n > 0 {
                blockIndex = i
                entries = decoded
                position = n - 1
                try settle()
                return
            }
            i -= 1
        }
        blockIndex = -1
        entries = []
        position = -1
        current = nil
    }

    /// Decodes the entry at ``position`` into ``current``.
    private func settle() throws {
        let (key, value) = entries[position]
        let separators = try reader.runIndex().separators
        guard separators.compare(blockIndex, key) >= 0 else {
            throw reader.defect(Block.Defect("key past its block's index separator"), block: blockIndex)
        }
        if blockIndex > 0, position == 0, separators.compare(blockIndex - 1, key) >= 0 {
            throw reader.defect(Block.Defect("block's first key does not follow the previous block's separator"), block: blockIndex)
        }
        current = try reader.entry(key: key, value: value, block: blockIndex)
    }
}
