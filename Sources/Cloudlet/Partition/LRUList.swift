/// A least-recently-used map of at most `capacity` entries: a dictionary into a doubly linked list kept in an array
/// (indices, not references, so nothing is allocated an access). Not thread-safe: its owner holds it under a lock
/// (``RecordCache``, ``EntryCache``).
struct LRUList<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        var prev: Int
        var next: Int
    }

    let capacity: Int
    private var index: [Key: Int] = [:]
    private var nodes: [Node] = []
    private var free: [Int] = []
    private var head = -1  // most recent
    private var tail = -1  // least recent

    init(capacity: Int) { self.capacity = max(capacity, 0) }

    var count: Int { index.count }

    /// The value of `key`, which becomes the most recently used.
    mutating func get(_ key: Key) -> Value? {
        guard let i = index[key] else { return nil }
        unlink(i)
        pushFront(i)
        return nodes[i].value
    }

    /// The key a ``put(_:_:)`` of a new key would evict: the least recently used, when the list is full.
    var victim: Key? { capacity > 0 && index.count >= capacity && tail >= 0 ? nodes[tail].key : nil }

    /// Whether `key` is present (it does not become the most recently used).
    func contains(_ key: Key) -> Bool { index[key] != nil }

    /// Sets `key` to `value`, the most recently used; the least recently used entry goes if the list is full.
    mutating func put(_ key: Key, _ value: Value) {
        guard capacity > 0 else { return }
        if let i = index[key] {
            nodes[i].value = value
            unlink(i)
            pushFront(i)
            return
        }
        let i: Int
        if index.count >= capacity {
            i = tail
            unlink(i)
            index[nodes[i].key] = nil
            nodes[i] = Node(key: key, value: value, prev: -1, next: -1)
        } else if let f = free.popLast() {
            i = f
            nodes[i] = Node(key: key, value: value, prev: -1, next: -1)
        } else {
            i = nodes.count
            nodes.append(Node(key: key, value: value, prev: -1, next: -1))
        }
        index[key] = i
        pushFront(i)
    }

    /// Removes `key`, if present.
    mutating func remove(_ key: Key) {
        guard let i = index.removeValue(forKey: key) else { return }
        unlink(i)
        free.append(i)
    }

    /// Removes everything.
    mutating func removeAll() { self = LRUList(capacity: capacity) }

    private mutating func unlink(_ i: Int) {
        let p = nodes[i].prev, n = nodes[i].next
        if p >= 0 { nodes[p].next = n } else { head = n }
        if n >= 0 { nodes[n].prev = p } else { tail = p }
    }

    private mutating func pushFront(_ i: Int) {
        nodes[i].prev = -1
        nodes[i].next = head
        if head >= 0 { nodes[head].prev = i }
        head = i
        if tail < 0 { tail = i }
    }
}
