/// A forward walk over the live keys of one range of an ``LSMReadView`` that makes nothing a step: each source (a
/// sorted memtable part, a level-0 run, a deeper level's runs) is a ``KeyWalk`` holding one key buffer, rewritten in
/// place from the block's bytes, and the scan stands on the smallest of them. What index walks (postings, ranges,
/// composite ranges) and counts read, where ``MergingIterator`` hands out every entry as an ``LSMEntry`` with its own
/// key array, through a layer of existential calls per source.
///
/// The sources are merged by a **loser tree** (a tournament: each inner node keeps the walk that lost the match
/// there), so a step replays one leaf-to-root path — log₂ k comparisons for k sources, where comparing every
/// source's key costs k: a memtable holds several sorted layers and a tree several runs, and the keys of a posting
/// or a range, written in random name order, interleave across all of them. A comparison looks first at the 8 bytes
/// after the prefix every key of the range shares (the range's bounds' common prefix), kept per walk as an integer,
/// then where those tie at the next 24 bytes (three more integers), and compares the keys' bytes after those only
/// where all tie. The scan's state (heads, tree, the last key) is plain memory it owns, and it reads its walks
/// without retaining them: nothing a step is reference-counted.
///
/// The newest entry of a key wins: the tree orders equal keys by sequence, highest first, then by source, newest
/// first; the older entries of the key come out right after it and are skipped, as is every entry of a key whose
/// newest entry is a tombstone. ``seek(_:)`` moves forward to a key without stepping through what lies before it (a
/// run's walk skips whole blocks and runs by binary search): what a merge join of postings uses to jump to the other
/// side's candidate.
///
/// Every block read is checked as any read checks it (checksum, structure, keys increasing); a damaged run throws
/// `corruption` naming it. Not thread-safe: one scan per thread.
public final class LSMKeyScan {
    private let walks: [KeyWalk]
    /// How many leading bytes every key of the range shares: the heads start after them.
    private let shared: Int
    /// Per walk: the 8 bytes of its key after ``shared``, big-endian (missing bytes as zeros).
    private let heads: UnsafeMutablePointer<UInt64>
    /// Per walk: the ``tailWords`` 8-byte words of its key after its head, likewise — compared only where heads tie,
    /// so that keys whose heads tie (an index's numbers hold one varying byte there and then escaped zeros) are
    /// mostly told apart by integers, not by a `memcmp` of their bytes.
    private let tails: UnsafeMutablePointer<UInt64>
    /// Three: ``tail(_:)`` and ``lastTails`` hold them as a tuple.
    private static let tailWords = 3
    /// Per walk: whether it is past its end (``KeyWalk/done``), kept here with the heads so that most comparisons
    /// read two plain arrays and touch no walk.
    private let ended: UnsafeMutablePointer<Bool>
    /// The loser tree over the walks: `tree[0]` is the winner (the smallest key, its newest entry); inner node `n`
    /// (1 ..< k) keeps the loser of its match; walk `i` is leaf `k + i`, and node `n`'s parent is `n / 2`.
    private let tree: UnsafeMutablePointer<Int>
    /// The walk standing on the current key; -1 once done.
    @exclusivity(unchecked) private var winner = -1
    /// The key last stepped past (its older entries, in other walks, are skipped), in a buffer of the scan's own,
    /// and whether there is one.
    @exclusivity(unchecked) private var last = KeyBuffer()
    @exclusivity(unchecked) private var lastHead: UInt64 = 0
    @exclusivity(unchecked) private var lastTails: (UInt64, UInt64, UInt64) = (0, 0, 0)
    @exclusivity(unchecked) private var hasLast = false

    /// `walks`: positioned, newest source first, all within `range`.
    init(_ walks: [KeyWalk], _ range: LSMKeyRange) throws {
        self.walks = walks
        if let lower = range.lower, let upper = range.upper {
            shared = LSMKey.commonPrefix(lower, upper)
        } else {
            shared = 0
        }
        // Plain memory the scan owns (freed in deinit): an array's element store checks the array is not shared first.
        let k = max(walks.count, 1)
        heads = .allocate(capacity: k)
        heads.initialize(repeating: 0, count: k)
        tails = .allocate(capacity: k * Self.tailWords)
        tails.initialize(repeating: 0, count: k * Self.tailWords)
        ended = .allocate(capacity: k)
        ended.initialize(repeating: false, count: k)
        tree = .allocate(capacity: k)
        tree.initialize(repeating: 0, count: k)
        for i in walks.indices { updateHead(i) }
        if !walks.isEmpty { tree[0] = try build(1) }
        try settle()
    }

    deinit {
        heads.deallocate()
        tails.deallocate()
        ended.deallocate()
        tree.deallocate()
    }

    /// Past the last live key of the range.
    public var done: Bool { winner < 0 }

    /// The current key (nil once ``done``), copied into an array the scan keeps for the purpose: let go of it before
    /// asking again, or that call makes a new one.
    public var key: [UInt8]? {
        guard winner >= 0 else { return nil }
        exported.removeAll(keepingCapacity: true)
        exported.append(contentsOf: walks[winner].keyBytes)
        return exported
    }

    /// What ``key`` hands out.
    @exclusivity(unchecked) private var exported: [UInt8] = []

    /// Compares the current key with `other` (``LSMKey/compare(_:_:)``) without copying it; requires not ``done``.
    public func compareKey(with other: [UInt8]) -> Int { LSMKey.compare(walks[winner].keyBytes, other) }

    /// The current entry's value where it lies (a block's bytes: holding it keeps the block, not a copy); nil once
    /// ``done``.
    public func valueBytes() throws -> ArraySlice<UInt8>? { winner < 0 ? nil : try walks[winner].valueBytes() }

    /// The current entry, made whole (key copied, value decoded); nil once ``done``.
    public func entry() throws -> LSMEntry? { winner < 0 ? nil : try walks[winner].entry() }

    /// Moves to the next live key.
    public func advance() throws {
        guard winner >= 0 else { return }
        try stepPast(winner)
        try settle()
    }

    /// Moves forward to the first live key at least `target`; stays if the current key is already there.
    public func seek(_ target: [UInt8]) throws {
        guard winner >= 0, LSMKey.compare(walks[winner].keyBytes, target) < 0 else { return }
        // A target a few keys ahead (a join of two common tokens' postings) is reached sooner by stepping — one path
        // replayed a step — than by seeking every walk and playing the whole tournament again.
        for _ in 0..<Self.stepsBeforeSeeking {
            try advance()
            guard winner >= 0, LSMKey.compare(walks[winner].keyBytes, target) < 0 else { return }
        }
        for i in walks.indices where !walks[i].done && LSMKey.compare(walks[i].keyBytes, target) < 0 {
            try walks[i].seek(target)
            updateHead(i)
        }
        // Replaying a path is right only for the walk that won (a loser's old key may be kept at a node of its path,
        // to be compared with its new one): the walks that moved play the whole tournament again.
        tree[0] = try build(1)
        hasLast = false
        try settle()
    }

    /// How many steps ``seek(_:)`` tries before it seeks.
    static let stepsBeforeSeeking = 8

    /// Makes the tree's winner the current key if it is live and new; else steps past it until one is.
    private func settle() throws {
        while true {
            let w = tree[0]
            guard !walks.isEmpty, !ended[w] else {
                winner = -1
                return
            }
            if hasLast && heads[w] == lastHead && tail(w) == lastTails
                && compareTied(walks[w].keyBytes, last.bytes) == 0
            {
                // An older entry of the key just stepped past.
                try walks[w].advance()
                updateHead(w)
                try replay(w)
            } else if !walks[w].isValue {
                try stepPast(w)  // the key's newest entry is a tombstone
            } else {
                winner = w
                return
            }
        }
    }

    /// Notes walk `w`'s key as the one stepped past and advances it.
    private func stepPast(_ w: Int) throws {
        // `walks` keeps every walk alive as long as the scan: no retain and release of it a step.
        unowned(unsafe) let walk = walks[w]
        last.replace(after: 0, with: walk.keyBytes)
        lastHead = heads[w]
        lastTails = tail(w)
        hasLast = true
        try walk.advance()
        updateHead(w)
        try replay(w)
    }

    private func updateHead(_ i: Int) {
        unowned(unsafe) let w = walks[i]
        ended[i] = w.done
        guard !w.done else { return }
        let key = w.keyBytes
        heads[i] = LSMKey.bigEndianWindow(key, from: shared)
        for j in 0..<Self.tailWords { tails[i * Self.tailWords + j] = LSMKey.bigEndianWindow(key, from: shared + 8 * (j + 1)) }
    }

    /// Walk `i`'s ``tails``.
    @inline(__always)
    private func tail(_ i: Int) -> (UInt64, UInt64, UInt64) {
        let t = tails + i * Self.tailWords
        return (t[0], t[1], t[2])
    }

    /// Whether walk `a`'s entry comes before walk `b`'s: a smaller key; for equal keys the higher sequence, then the
    /// newer source. A walk past its end comes after every other.
    private func precedes(_ a: Int, _ b: Int) throws -> Bool {
        if ended[b] { return !ended[a] }
        if ended[a] { return false }
        if heads[a] != heads[b] { return heads[a] < heads[b] }
        let ta = tails + a * Self.tailWords, tb = tails + b * Self.tailWords
        for j in 0..<Self.tailWords where ta[j] != tb[j] { return ta[j] < tb[j] }
        unowned(unsafe) let wa = walks[a]
        unowned(unsafe) let wb = walks[b]
        let c = compareTied(wa.keyBytes, wb.keyBytes)
        if c != 0 { return c < 0 }
        let sa = try wa.sequence(), sb = try wb.sequence()
        return sa != sb ? sa > sb : a < b
    }

    /// Compares two keys of the range whose heads and tails are equal (``LSMKey/compare(_:_:)``'s answer): from the
    /// bytes after the shared prefix, the head and the tails, which are equal in both, where both have them.
    @inline(__always)
    private func compareTied(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let known = shared + 8 * (1 + Self.tailWords)
        guard a.count >= known, b.count >= known else { return LSMKey.compare(a, b) }
        return LSMKey.compare(UnsafeRawBufferPointer(rebasing: a[known...]), UnsafeRawBufferPointer(rebasing: b[known...]))
    }

    /// Plays the matches of the subtree at node `n` (a leaf if `n` ≥ k), keeping each match's loser; its winner.
    private func build(_ n: Int) throws -> Int {
        let k = walks.count
        if n >= k { return n - k }
        let a = try build(2 * n), b = try build(2 * n + 1)
        if try precedes(a, b) {
            tree[n] = b
            return a
        }
        tree[n] = a
        return b
    }

    /// Replays walk `i`'s path after it moved, `i` being the winner before: at each node up to the root the better of
    /// it and the kept loser goes on, the other stays.
    private func replay(_ i: Int) throws {
        var w = i
        var n = (walks.count + i) / 2
        while n >= 1 {
            let kept = tree[n]
            if try precedes(kept, w) {
                tree[n] = w
                w = kept
            }
            n /= 2
        }
        tree[0] = w
    }
}

extension LSMReadView {
    /// A scan of the live keys of `range`, positioned on its first (``LSMKeyScan``).
    public func makeKeyScan(_ range: LSMKeyRange = .all) throws -> LSMKeyScan {
        var walks: [KeyWalk] = []
        for memtable in memtables {
            for part in memtable.sortedParts() {
                let walk = TableKeyWalk(part, range)
                if !walk.done { walks.append(walk) }
            }
        }
        // Level 0 newest first, then each level as one source: the sources in the order of their age, newest first,
        // which decides equal keys with equal sequences.
        for run in level0 where Self.overlaps(run.metadata, range) {
            let walk = try RunKeyWalk([run], range)
            if !walk.done { walks.append(walk) }
        }
        for level in levels {
            let runs = level.filter { Self.overlaps($0.metadata, range) }
            guard !runs.isEmpty else { continue }
            let walk = try RunKeyWalk(runs, range)
            if !walk.done { walks.append(walk) }
        }
        return try LSMKeyScan(walks, range)
    }

    /// Whether a run's key range meets `range`.
    static func overlaps(_ m: LSMRunMetadata, _ range: LSMKeyRange) -> Bool {
        if let upper = range.upper, LSMKey.compare(m.smallestKey, upper) >= 0 { return false }
        if let lower = range.lower, LSMKey.compare(m.largestKey, lower) < 0 { return false }
        return true
    }
}
