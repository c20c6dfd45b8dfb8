/// Iterates runs with disjoint key ranges, in key order (one level ≥ 1 of a tree), as one sequence, opening a run
/// and positioning in it only when the iteration reaches it: a seek reads one run of the level, whatever the number
/// of runs. A level-0 run (ranges overlap) is iterated as a level of one run, which opens it on first use the same
/// way. With `descending`, the same backwards (ReverseIterator.swift): from the last run, over reverse run iterators.
final class LevelIterator: LSMIterator {
    private let runs: [LSMRunHandle]
    private let fillCache: Bool
    private let descending: Bool
    private var index = 0
    private var child: (any LSMIterator)?
    private(set) var current: LSMEntry?

    /// `runs` in key order with disjoint key ranges.
    init(_ runs: [LSMRunHandle], fillCache: Bool = true, descending: Bool = false) {
        self.runs = runs
        self.fillCache = fillCache
        self.descending = descending
    }

    /// One step through the runs in the iteration's direction.
    private var step: Int { descending ? -1 : 1 }

    func seekToFirst() throws { try position(at: descending ? runs.count - 1 : 0) { try $0.seekToFirst() } }

    func seek(_ key: [UInt8]) throws {
        let i = LSMReadView.firstRun(endingAtOrAfter: key, in: runs)
        try position(at: descending ? min(i, runs.count - 1) : i) { try $0.seek(key) }
    }

    func advance() throws {
        guard current != nil, let child else { return }
        try child.advance()
        if let entry = child.current {
            current = entry
        } else {
            try position(at: index + step) { try $0.seekToFirst() }
        }
    }

    /// Positions in run `i` with `body`, going on to the first entry of the next runs (in the iteration's direction)
    /// while that leaves nothing.
    private func position(at i: Int, _ body: (any LSMIterator) throws -> Void) throws {
        var i = i
        var first = true
        while runs.indices.contains(i) {
            let reader = try runs[i].reader()
            let it: any LSMIterator = descending ? SortedRunReverseIterator(reader) : reader.makeIterator(fillCache: fillCache)
            if first { try body(it) } else { try it.seekToFirst() }
            if let entry = it.current {
                index = i
                child = it
                current = entry
                return
            }
            first = false
            i += step
        }
        index = descending ? -1 : runs.count
        child = nil
        current = nil
    }
}
