/// A sorted set kept as a list of sorted blocks of at most `blockCapacity` elements: the ordered structure behind
/// SORTABLE indexes and each record type's list of record names.
///
/// Lookups are two binary searches (over the blocks' last elements, then inside one block). An insert or a
/// removal moves at most one block's elements plus, when a block splits or empties, the block list's pointers —
/// O(log n + blockCapacity + n / blockCapacity), never O(n). Blocks split in half when full and merge with a
/// neighbour when both are small. Value semantics: copies share blocks until one is changed.
struct SortedBlockList<Element: Comparable & Sendable>: Sendable {
    private(set) var blocks: [[Element]] = []
    /// Number of elements.
    private(set) var count = 0
    let blockCapacity: Int

    /// A position: a block and an offset in it. ``endIndex`` is (blocks.count, 0). Positions are invalidated by any
    /// change; find them again by element (``lowerBound(_:)``).
    struct Index: Comparable, Sendable {
        var block: Int
        var offset: Int

        static func < (a: Index, b: Index) -> Bool { (a.block, a.offset) < (b.block, b.offset) }
    }

    init(blockCapacity: Int = 256) {
        precondition(blockCapacity >= 4, "block capacity must be at least 4")
        self.blockCapacity = blockCapacity
    }

    /// Builds from elements already sorted ascending and unique (checked), filling blocks to 3/4 so that the
    /// first inserts do not split them all.
    init<S: Sequence>(sorted elements: S, blockCapacity: Int = 256) where S.Element == Element {
        self.init(blockCapacity: blockCapacity)
        let fill = max(blockCapacity * 3 / 4, 1)
        var current: [Element] = []
        current.reserveCapacity(fill)
        var previous: Element?
        for e in elements {
            if let previous { precondition(previous < e, "SortedBlockList(sorted:) needs ascending, unique elements") }
            previous = e
            current.append(e)
            count += 1
            if current.count == fill {
                blocks.append(current)
                current = []
                current.reserveCapacity(fill)
            }
        }
        if !current.isEmpty { blocks.append(current) }
    }

    var isEmpty: Bool { count == 0 }
    var startIndex: Index { Index(block: 0, offset: 0) }
    var endIndex: Index { Index(block: blocks.count, offset: 0) }
    var first: Element? { blocks.first?.first }
    var last: Element? { blocks.last?.last }

    subscript(i: Index) -> Element { blocks[i.block][i.offset] }

    func index(after i: Index) -> Index {
        i.offset + 1 < blocks[i.block].count ? Index(block: i.block, offset: i.offset + 1) : Index(block: i.block + 1, offset: 0)
    }

    /// The position before `i`; `i` must not be ``startIndex``.
    func index(before i: Index) -> Index {
        if i.offset > 0 { return Index(block: i.block, offset: i.offset - 1) }
        return Index(block: i.block - 1, offset: blocks[i.block - 1].count - 1)
    }

    /// The first position whose element is ≥ `e` (``endIndex`` if none).
    func lowerBound(_ e: Element) -> Index {
        let b = firstBlock { !($0 < e) }
        guard b < blocks.count else { return endIndex }
        return Index(block: b, offset: Self.partition(blocks[b]) { !($0 < e) })
    }

    /// The first position whose element is > `e` (``endIndex`` if none).
    func upperBound(_ e: Element) -> Index {
        let b = firstBlock { e < $0 }
        guard b < blocks.count else { return endIndex }
        return Index(block: b, offset: Self.partition(blocks[b]) { e < $0 })
    }

    func contains(_ e: Element) -> Bool {
        let i = lowerBound(e)
        return i != endIndex && self[i] == e
    }

    /// Inserts `e`; false if it was already there.
    @discardableResult
    mutating func insert(_ e: Element) -> Bool {
        if blocks.isEmpty {
            blocks = [[e]]
            count = 1
            return true
        }
        let b = min(firstBlock { !($0 < e) }, blocks.count - 1)
        let offset = Self.partition(blocks[b]) { !($0 < e) }
        if offset < blocks[b].count && blocks[b][offset] == e { return false }
        blocks[b].insert(e, at: offset)
        count += 1
        if blocks[b].count > blockCapacity {
            let half = blocks[b].count / 2
            let tail = Array(blocks[b][half...])
            blocks[b].removeSubrange(half...)
            blocks.insert(tail, at: b + 1)
        }
        return true
    }

    /// Removes `e`; false if it was not there.
    @discardableResult
    mutating func remove(_ e: Element) -> Bool {
        let i = lowerBound(e)
        guard i != endIndex, self[i] == e else { return false }
        let b = i.block
        blocks[b].remove(at: i.offset)
        count -= 1
        if blocks[b].isEmpty {
            blocks.remove(at: b)
        } else if blocks[b].count < blockCapacity / 4 {
            // Merge a small block into a small neighbour so that blocks stay reasonably full.
            if b + 1 < blocks.count && blocks[b].count + blocks[b + 1].count <= blockCapacity / 2 {
                blocks[b].append(contentsOf: blocks[b + 1])
                blocks.remove(at: b + 1)
            } else if b > 0 && blocks[b - 1].count + blocks[b].count <= blockCapacity / 2 {
                blocks[b - 1].append(contentsOf: blocks[b])
                blocks.remove(at: b)
            }
        }
        return true
    }

    /// Number of elements in `from ..< to` (positions from this list). O(blocks in between).
    func distance(from a: Index, to b: Index) -> Int {
        guard a < b else { return 0 }
        if a.block == b.block { return b.offset - a.offset }
        var n = blocks[a.block].count - a.offset
        var k = a.block + 1
        while k < b.block {
            n += blocks[k].count
            k += 1
        }
        return n + (b.block < blocks.count ? b.offset : 0)
    }

    /// The elements of `from ..< to` in order.
    func elements(from a: Index, to b: Index) -> [Element] {
        var out: [Element] = []
        out.reserveCapacity(distance(from: a, to: b))
        var i = a
        while i < b {
            out.append(self[i])
            i = index(after: i)
        }
        return out
    }

    /// Every element in order.
    var all: [Element] { blocks.flatMap { $0 } }

    /// First block whose last element satisfies `p` (monotone: false…false true…true), or blocks.count.
    private func firstBlock(_ p: (Element) -> Bool) -> Int {
        var lo = 0
        var hi = blocks.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if p(blocks[mid][blocks[mid].count - 1]) { hi = mid } else { lo = mid + 1 }
        }
        return lo
    }

    /// First offset in `a` whose element satisfies `p` (monotone), or a.count.
    private static func partition(_ a: [Element], _ p: (Element) -> Bool) -> Int {
        var lo = 0
        var hi = a.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if p(a[mid]) { hi = mid } else { lo = mid + 1 }
        }
        return lo
    }

    /// Checks the structure's invariants (for tests): blocks non-empty, within capacity, sorted within and
    /// across, and `count` right.
    func checkInvariants() -> String? {
        var n = 0
        var previous: Element?
        for (bi, block) in blocks.enumerated() {
            if block.isEmpty { return "block \(bi) is empty" }
            if block.count > blockCapacity { return "block \(bi) holds \(block.count) > \(blockCapacity)" }
            for e in block {
                if let previous, !(previous < e) { return "block \(bi) is out of order" }
                previous = e
                n += 1
            }
        }
        return n == count ? nil : "count is \(count) but the blocks hold \(n)"
    }
}
