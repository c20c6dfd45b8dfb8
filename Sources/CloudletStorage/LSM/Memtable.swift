/// The newest writes of a tree, in memory, sorted by key: one entry a key (a value or a tombstone), the one with
/// the highest sequence.
///
/// A **persistent treap**: immutable nodes, each insert copies the O(log n) nodes on its path and shares the rest.
/// Chosen over a skip list or a sorted array + pending dictionary because a copy of the memtable is free and never
/// changes: a read view keeps the memtable as it was (a value copy), the writer goes on inserting into its own,
/// and readers need no lock since nothing they hold is ever mutated. The price is a few small allocations per
/// insert. Node priorities are the key's hash, so the shape depends only on the key set (expected depth
/// O(log n)).
public struct Memtable: Sendable {
    final class Node: @unchecked Sendable {
        let entry: LSMEntry
        let priority: UInt64
        let left: Node?
        let right: Node?
        /// The same children without reference counting, for lookups: a walk from a root the caller holds reaches
        /// only nodes that root keeps alive, so it need not retain each one it passes (which was most of a lookup's
        /// cost). Immutable like the rest of the node.
        unowned(unsafe) let fastLeft: Node?
        unowned(unsafe) let fastRight: Node?

        init(_ entry: LSMEntry, _ priority: UInt64, _ left: Node?, _ right: Node?) {
            self.entry = entry
            self.priority = priority
            self.left = left
            self.right = right
            fastLeft = left
            fastRight = right
        }

        func with(left: Node?) -> Node { Node(entry, priority, left, right) }
        func with(right: Node?) -> Node { Node(entry, priority, left, right) }
    }

    /// What one entry is counted as beyond its key and value bytes (node object, references, priority).
    public static let entryOverhead = 80

    private(set) var root: Node?
    /// How many keys it holds.
    public private(set) var count = 0
    /// Key and value bytes plus ``entryOverhead`` an entry: what it roughly takes in memory.
    public private(set) var approximateBytes = 0
    /// The highest sequence applied (0 when empty).
    public private(set) var maxSequence: UInt64 = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    /// Records a write. An entry older (by sequence) than the one the memtable holds for its key is ignored, so
    /// replaying writes twice is harmless.
    public mutating func apply(_ entry: LSMEntry) {
        var replaced: LSMEntry?
        var ignored = false
        root = Self.insert(root, entry, KeyHash.hash(entry.key), &replaced, &ignored)
        guard !ignored else { return }
        maxSequence = max(maxSequence, entry.sequence)
        approximateBytes += Self.size(entry)
        if let replaced { approximateBytes -= Self.size(replaced) } else { count += 1 }
    }

    /// Records a value for `key` (see ``apply(_:)``).
    public mutating func put(_ key: [UInt8], _ value: [UInt8], sequence: UInt64) {
        apply(.put(key, value, sequence: sequence))
    }

    /// Records a tombstone for `key` (see ``apply(_:)``).
    public mutating func delete(_ key: [UInt8], sequence: UInt64) { apply(.delete(key, sequence: sequence)) }

    /// The entry of `key` (a tombstone included), or nil if the memtable has none.
    public func get(_ key: [UInt8]) -> LSMEntry? {
        guard let root else { return nil }
        return withExtendedLifetime(root) {
            unowned(unsafe) var node: Node? = root
            while let n = node {
                let c = LSMKey.compare(key, n.entry.key)
                if c == 0 { return n.entry }
                node = c < 0 ? n.fastLeft : n.fastRight
            }
            return nil
        }
    }

    /// An iterator over the memtable as it is now (later writes to this value do not show).
    public func makeIterator() -> MemtableIterator { MemtableIterator(root) }

    private static func size(_ e: LSMEntry) -> Int { e.key.count + e.value.count + entryOverhead }

    private static func insert(
        _ node: Node?, _ entry: LSMEntry, _ priority: UInt64, _ replaced: inout LSMEntry?, _ ignored: inout Bool
    ) -> Node {
        guard let node else { return Node(entry, priority, nil, nil) }
        let c = LSMKey.compare(entry.key, node.entry.key)
        if c == 0 {
            if entry.sequence < node.entry.sequence {
                ignored = true
                return node
            }
            replaced = node.entry
            return Node(entry, node.priority, node.left, node.right)
        }
        if c < 0 {
            let l = insert(node.left, entry, priority, &replaced, &ignored)
            if l.priority > node.priority { return l.with(right: node.with(left: l.right)) }  // rotate right
            return node.with(left: l)
        }
        let r = insert(node.right, entry, priority, &replaced, &ignored)
        if r.priority > node.priority { return r.with(left: node.with(right: r.left)) }  // rotate left
        return node.with(right: r)
    }
}

/// An in-order walk of a memtable's tree with an explicit stack of the nodes still to visit.
public final class MemtableIterator: LSMIterator {
    private let root: Memtable.Node?
    private var stack: [Memtable.Node] = []

    init(_ root: Memtable.Node?) { self.root = root }

    public var current: LSMEntry? { stack.last?.entry }

    public func seekToFirst() {
        stack.removeAll(keepingCapacity: true)
        pushLeft(root)
    }

    public func seek(_ key: [UInt8]) {
        stack.removeAll(keepingCapacity: true)
        var node = root
        while let n = node {
            if LSMKey.compare(n.entry.key, key) >= 0 {
                stack.append(n)
                node = n.left
            } else {
                node = n.right
            }
        }
    }

    public func advance() {
        guard let top = stack.popLast() else { return }
        pushLeft(top.right)
    }

    private func pushLeft(_ node: Memtable.Node?) {
        var node = node
        while let n = node {
            stack.append(n)
            node = n.left
        }
    }
}
