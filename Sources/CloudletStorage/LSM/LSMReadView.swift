/// A consistent, unchanging view of an ``LSMTree``: the memtables as they were when it was taken (free copies of
/// persistent trees) and the runs that were live then (held, so that no merge deletes their files). Writes,
/// flushes and merges that happen afterwards do not show. Safe to share between threads; each iterator is for one
/// thread.
public final class LSMReadView: Sendable {
    /// Newest first.
    let memtables: [Memtable]
    /// Level 0 newest first, then levels 1… by key.
    let runs: [LSMRunHandle]

    init(memtables: [Memtable], runs: [LSMRunHandle]) {
        self.memtables = memtables
        self.runs = runs
    }

    /// A view of `memtables` (newest first) over `base` (its memtables, then its runs; nil: nothing under them):
    /// how a caller that keeps its own memtables reads them with the tree's runs.
    public convenience init(memtables: [Memtable], over base: LSMReadView?) {
        self.init(memtables: memtables + (base?.memtables ?? []), runs: base?.runs ?? [])
    }

    /// The newest entry of `key`, a tombstone included, or nil if no source has one. Looks at the memtables, then
    /// the runs that may hold the key (key range and bloom filter), newest first, and stops at the first hit.
    public func entry(_ key: [UInt8]) throws -> LSMEntry? {
        for memtable in memtables {
            if let e = memtable.get(key) { return e }
        }
        for run in runs {
            let m = run.metadata
            guard LSMKey.compare(key, m.smallestKey) >= 0, LSMKey.compare(key, m.largestKey) <= 0 else { continue }
            if let e = try run.reader.get(key) { return e }
        }
        return nil
    }

    /// The value of `key`, or nil if it has none or was deleted.
    public func get(_ key: [UInt8]) throws -> [UInt8]? {
        guard let e = try entry(key), !e.isTombstone else { return nil }
        return e.value
    }

    /// A merged iterator over every live (not deleted) key, newest values; not positioned yet.
    public func makeIterator() -> MergingIterator {
        MergingIterator(
            memtables.map { $0.makeIterator() } + runs.map { $0.reader.makeIterator() }, dropTombstones: true)
    }

    /// The live entries in `range`, in key order, at most `limit`.
    public func scan(_ range: LSMKeyRange = .all, limit: Int = .max) throws -> [LSMEntry] {
        try makeIterator().entries(in: range, limit: limit)
    }

    /// The file numbers of the runs this view holds (for tests and tools).
    public var runFileNumbers: [UInt64] { runs.map(\.metadata.fileNumber) }
}
