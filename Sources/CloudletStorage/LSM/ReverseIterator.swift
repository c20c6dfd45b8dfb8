/// A cursor over entries in decreasing key order: a memtable, a run, or several of them merged — what a read walking
/// a key range backwards uses (a query sorted descending by an indexed field). After ``seek(before:)`` it stands on
/// an entry (``current``) or before the first (nil). Errors (a corrupt block) are thrown, never skipped.
public protocol LSMReverseIterator: AnyObject {
    /// The entry at the position; nil before the first entry (and before the first seek).
    var current: LSMEntry? { get }
    /// Positions at the last entry whose key is below `key` (nil: at the last entry).
    func seek(before key: [UInt8]?) throws
    /// Moves to the previous entry (before the first after the first).
    func retreat() throws
}

extension LSMReadView {
    /// A merged iterator walking every live (not deleted) key backwards, newest values; not positioned yet.
    public func makeReverseIterator() -> MergingReverseIterator {
        MergingReverseIterator(
            memtables.map { MemtableReverseIterator($0.sortedParts()) } + runs.map { SortedRunReverseIterator($0.reader) })
    }
}

/// ``MergingIterator`` backwards, dropping tombstones: for equal keys the entry with the highest sequence wins (on a
/// tie, the child listed first — list children newest first); a winning tombstone is skipped with every older entry
/// of its key.
public final class MergingReverseIterator: LSMReverseIterator {
    private let children: [any LSMReverseIterator]
    public private(set) var current: LSMEntry?

    /// Merges `children`, listed newest first (they need not be positioned).
    public init(_ children: [any LSMReverseIterator]) { self.children = children }

    public func seek(before key: [UInt8]?) throws {
        for child in children { try child.seek(before: key) }
        try settle()
    }

    public func retreat() throws {
        guard let key = current?.key else { return }
        try skip(key)
        try settle()
    }

    /// Moves back every child standing on `key`.
    private func skip(_ key: [UInt8]) throws {
        for child in children {
            if let entry = child.current, entry.key == key { try child.retreat() }
        }
    }

    /// Makes ``current`` the winner among the largest current keys (skipping tombstones).
    private func settle() throws {
        while true {
            var winner: LSMEntry?
            for child in children {
                guard let entry = child.current else { continue }
                guard let w = winner else {
                    winner = entry
                    continue
                }
                let c = LSMKey.compare(entry.key, w.key)
                if c > 0 || (c == 0 && entry.sequence > w.sequence) { winner = entry }
            }
            guard let winner, winner.isTombstone else {
                current = winner
                return
            }
            try skip(winner.key)
        }
    }
}

/// A memtable walked backwards: its sorted parts (``Memtable/sortedParts()``), the newest part's entry winning for a
/// key several parts hold. Tombstones are returned like values.
final class MemtableReverseIterator: LSMReverseIterator {
    private let parts: [[LSMEntry]]
    /// Per part, the index of its current entry (-1: before its first).
    private var positions: [Int]
    private(set) var current: LSMEntry?

    init(_ parts: [[LSMEntry]]) {
        self.parts = parts
        positions = Array(repeating: -1, count: parts.count)
    }

    func seek(before key: [UInt8]?) {
        for (p, entries) in parts.enumerated() {
            guard let key else {
                positions[p] = entries.count - 1
                continue
            }
            var lo = 0
            var hi = entries.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if LSMKey.compare(entries[mid].key, key) < 0 { lo = mid + 1 } else { hi = mid }
            }
            positions[p] = lo - 1
        }
        settle()
    }

    func retreat() {
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
final class SortedRunReverseIterator: LSMReverseIterator {
    private let reader: SortedRunReader
    private var blockIndex = -1
    /// The current block's entries (key, value bytes), in key order.
    private var entries: [([UInt8], ArraySlice<UInt8>)] = []
    private var position = -1
    private(set) var current: LSMEntry?

    init(_ reader: SortedRunReader) { self.reader = reader }

    func seek(before key: [UInt8]?) throws {
        let index = try reader.runIndex()
        guard let key else {
            try load(block: index.handles.count - 1, before: nil)
            return
        }
        let i = min(SortedRunReader.blockIndex(for: key, in: index.separators), index.handles.count - 1)
        try load(block: i, before: key)
    }

    func retreat() throws {
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
        guard LSMKey.compare(key, try reader.runIndex().separators[blockIndex]) <= 0 else {
            throw reader.defect(Block.Defect("key past its block's index separator"), block: blockIndex)
        }
        if blockIndex > 0, position == 0, LSMKey.compare(key, try reader.runIndex().separators[blockIndex - 1]) <= 0 {
            throw reader.defect(Block.Defect("block's first key does not follow the previous block's separator"), block: blockIndex)
        }
        current = try reader.entry(key: key, value: value, block: blockIndex)
    }
}
