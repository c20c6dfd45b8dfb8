/// A first-in, first-out queue over an array with a moving head: O(1) amortized at both ends, and an element leaves
/// the storage when it is taken (its captures go with it, not when the queue next drains). Not thread-safe: the
/// owner's lock guards it (``BlockingThreads``, ``DedicatedExecutor``).
struct FIFO<Element> {
    private var items: [Element?] = []
    private var head = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { head == items.count }

    mutating func append(_ element: Element) { items.append(element) }

    /// The oldest element, removed; nil when empty.
    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let element = items[head].take()
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }
}
