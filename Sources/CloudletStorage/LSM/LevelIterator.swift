/// Iterates runs with disjoint key ranges, in key order (one level ≥ 1 of a tree), as one sequence, opening a run
/// and positioning in it only when the iteration reaches it: a seek reads one run of the level, whatever the number
/// of runs. A level-0 run (ranges overlap) is iterated as a level of one run, which opens it on first use the same
/// way.
final class LevelIterator: LSMIterator {
    private let runs: [LSMRunHandle]
    private let fillCache: Bool
    private var index = 0
    private var child: SortedRunIterator?
    private(set) var current: LSMEntry?

    /// `runs` in key order with disjoint key ranges.
    init(_ runs: [LSMRunHandle], fillCache: Bool = true) {
        self.runs = runs
        self.fillCache = fillCache
    }

    func seekToFirst() throws { try position(at: 0) { try $0.seekToFirst() } }

    func seek(_ key: [UInt8]) throws { try position(at: LSMReadView.firstRun(endingAtOrAfter: key, in: runs)) { try $0.seek(key) } }

    func advance() throws {
        guard current != nil, let child else { return }
        try child.advance()
        if let entry = child.current {
            current = entry
        } else {
            try position(at: index + 1) { try $0.seekToFirst() }
        }
    }

    /// Positions in run `i` with `body`, going on to the first entry of the next runs while that leaves nothing.
    private func position(at i: Int, _ body: (SortedRunIterator) throws -> Void) throws {
        var i = i
        var first = true
        while i < runs.count {
            let it = try runs[i].reader().makeIterator(fillCache: fillCache)
            if first { try body(it) } else { try it.seekToFirst() }
            if let entry = it.current {
                index = i
                child = it
                current = entry
                return
            }
            first = false
            i += 1
        }
        index = runs.count
        child = nil
        current = nil
    }
}
