/// Merges iterators (memtables and runs) into one ordered stream with one entry a key: for equal keys the entry
/// with the highest sequence wins (on a tie, the child listed first — list children newest first). With
/// `dropTombstones` a winning tombstone is skipped along with every older entry of its key, which is what reads
/// want and what a merge into the bottom level wants (nothing below can hold an older value to hide); without it
/// winning tombstones are returned, as a merge into any other level must keep them.
///
/// Choosing the winner compares the children's current keys one by one: a tree has few children (memtables, level-0
/// runs, one run a level), so a heap would not pay for itself. That step also notes the runner-up key, and a step
/// whose winner stays alone and before it advances only that child.
public final class MergingIterator: LSMIterator {
    private let children: [any LSMIterator]
    public let dropTombstones: Bool
    /// Whether the children walk keys in decreasing order (``LSMReadView/makeReverseIterator()``): the largest key
    /// comes first.
    public let descending: Bool
    public private(set) var current: LSMEntry?

    /// Merges `children`, listed newest first (they need not be positioned).
    public init(_ children: [any LSMIterator], dropTombstones: Bool, descending: Bool = false) {
        self.children = children
        self.dropTombstones = dropTombstones
        self.descending = descending
    }

    public func seekToFirst() throws {
        for child in children { try child.seekToFirst() }
        try settle()
    }

    public func seek(_ key: [UInt8]) throws {
        for child in children { try child.seek(key) }
        try settle()
    }

    public func advance() throws {
        guard current != nil else { return }
        if holders.count == 1 {
            // The winner alone on its key: while its next key stays before the runner-up's, it wins again, and no
            // other child need be looked at (a run walked after a flush, or keys that come in clusters per source).
            let child = children[holders[0]]
            while true {
                try child.advance()
                guard let entry = child.current else { break }
                if let r = runnerUp, order(entry.key, r) >= 0 { break }
                if dropTombstones, entry.isTombstone { continue }
                current = entry
                return
            }
        } else {
            try advanceHolders()
        }
        try settle()
    }

    /// Negative if `a` comes before `b` in the iteration's direction, zero if equal, positive if after.
    @inline(__always)
    private func order(_ a: [UInt8], _ b: [UInt8]) -> Int { descending ? LSMKey.compare(b, a) : LSMKey.compare(a, b) }

    /// The children standing on ``current``'s key, found by the step that chose it: advancing past the key moves
    /// exactly these, with no second comparison of every child's key.
    private var holders: [Int] = []
    /// The next key after ``current``'s that another child stands on (nil: none), found by the same step.
    private var runnerUp: [UInt8]?

    private func advanceHolders() throws {
        for i in holders { try children[i].advance() }
    }

    /// Makes ``current`` the winner among the smallest current keys (skipping dropped tombstones), noting the
    /// children that hold its key.
    private func settle() throws {
        while true {
            var winner: LSMEntry?
            var second: [UInt8]?
            holders.removeAll(keepingCapacity: true)
            for (i, child) in children.enumerated() {
                guard let entry = child.current else { continue }
                guard let w = winner else {
                    winner = entry
                    holders.append(i)
                    continue
                }
                let c = order(entry.key, w.key)
                if c < 0 {
                    second = w.key
                    winner = entry
                    holders.removeAll(keepingCapacity: true)
                    holders.append(i)
                } else if c == 0 {
                    holders.append(i)
                    if entry.sequence > w.sequence { winner = entry }
                } else if second.map({ order(entry.key, $0) < 0 }) ?? true {
                    second = entry.key
                }
            }
            runnerUp = second
            guard let winner, dropTombstones, winner.isTombstone else {
                current = winner
                return
            }
            try advanceHolders()
        }
    }
}
