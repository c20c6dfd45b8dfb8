/// A consistent, unchanging view of an ``LSMTree``: the memtables as they were when it was taken (free copies of
/// persistent trees) and the runs that were live then (held, so that no merge deletes their files). Writes,
/// flushes and merges that happen afterwards do not show. Safe to share between threads; each iterator is for one
/// thread.
public final class LSMReadView: Sendable {
    /// Newest first.
    let memtables: [Memtable]
    /// Level 0 newest first, then levels 1… by key.
    let runs: [LSMRunHandle]

    /// Level-0 runs (newest first), which may overlap; then each deeper level's runs, disjoint and by key.
    let level0: [LSMRunHandle]
    let levels: [[LSMRunHandle]]

    init(memtables: [Memtable], runs: [LSMRunHandle]) {
        self.memtables = memtables
        self.runs = runs
        level0 = runs.filter { $0.metadata.level == 0 }
        var levels: [[LSMRunHandle]] = []
        for run in runs where run.metadata.level > 0 {
            if levels.last?.last?.metadata.level == run.metadata.level { levels[levels.count - 1].append(run) } else { levels.append([run]) }
        }
        self.levels = levels
    }

    /// The index of the first of `runs` (disjoint, by key) whose largest key is at least `key` (`runs.count` if none).
    static func firstRun(endingAtOrAfter key: [UInt8], in runs: [LSMRunHandle]) -> Int {
        var low = 0
        var high = runs.count
        while low < high {
            let mid = (low + high) / 2
            if LSMKey.compare(runs[mid].metadata.largestKey, key) < 0 { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// A view of `memtables` (newest first) over `base` (its memtables, then its runs; nil: nothing under them):
    /// how a caller that keeps its own memtables reads them with the tree's runs.
    public convenience init(memtables: [Memtable], over base: LSMReadView?) {
        self.init(memtables: memtables + (base?.memtables ?? []), runs: base?.runs ?? [])
    }

    /// The newest entry of `key`, a tombstone included, or nil if no source has one. Looks at the memtables, then
    /// the level-0 runs whose key range holds the key, newest first, then in each deeper level the one run whose
    /// range may hold it (a binary search), each run through its bloom filter; stops at the first hit.
    public func entry(_ key: [UInt8]) throws -> LSMEntry? { try entry(key, hash: KeyHash.hash(key)) }

    /// ``entry(_:)`` of a key whose ``KeyHash`` the caller has: every memtable and run probes its filter with it.
    public func entry(_ key: [UInt8], hash: UInt64) throws -> LSMEntry? {
        for memtable in memtables {
            if let e = memtable.get(key, hash: hash) { return e }
        }
        for run in level0 {
            let m = run.metadata
            guard LSMKey.compare(key, m.smallestKey) >= 0, LSMKey.compare(key, m.largestKey) <= 0 else { continue }
            if let e = try run.reader().get(key, hash: hash) { return e }
        }
        for level in levels {
            let i = Self.firstRun(endingAtOrAfter: key, in: level)
            guard i < level.count, LSMKey.compare(key, level[i].metadata.smallestKey) >= 0 else { continue }
            if let e = try level[i].reader().get(key, hash: hash) { return e }
        }
        return nil
    }

    /// The value of `key`, or nil if it has none or was deleted.
    public func get(_ key: [UInt8]) throws -> [UInt8]? {
        guard let e = try entry(key), !e.isTombstone else { return nil }
        return e.value
    }

    /// A merged iterator over every live (not deleted) key, newest values; not positioned yet. Each level ≥ 1 is one
    /// child (``LevelIterator``): a seek positions in one run a level, and runs are opened as the iteration reaches them.
    public func makeIterator() -> MergingIterator {
        let children: [any LSMIterator] =
            memtables.map { $0.makeIterator() } + level0.map { LevelIterator([$0]) } + levels.map { LevelIterator($0) }
        return MergingIterator(children, dropTombstones: true)
    }

    /// The live entries in `range`, in key order, at most `limit`.
    public func scan(_ range: LSMKeyRange = .all, limit: Int = .max) throws -> [LSMEntry] {
        try makeIterator().entries(in: range, limit: limit)
    }

    /// The file numbers of the runs this view holds (for tests and tools).
    public var runFileNumbers: [UInt64] { runs.map(\.metadata.fileNumber) }
}
