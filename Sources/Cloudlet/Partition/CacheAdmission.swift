import CloudletCore

/// TinyLFU admission for a full LRU cache (Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient Cache
/// Admission Policy"): a key that missed comes in only if it was looked up before within a window (the
/// ``Doorkeeper``) and, when the cache is full, only if it has been looked up more often lately than the entry it
/// would evict (a ``FrequencySketch`` of every lookup). Without the second rule, reads that cycle over more keys than
/// the cache holds (a query's pages run again and again, uniform reads of a large store) admit every key on its
/// second read and evict one for it: each read then paid an insertion, an eviction and — for decoded records — a
/// deallocation, for a hit rate near nothing. With it the cache keeps what it has unless something read more often
/// comes along, so such reads cost a lookup and hit as often as the cache's share of the keys.
struct CacheAdmission {
    private var doorkeeper: Doorkeeper
    private var sketch: FrequencySketch

    /// Admission for a cache of `capacity` entries.
    init(capacity: Int) {
        doorkeeper = Doorkeeper(capacity: capacity)
        sketch = FrequencySketch(capacity: capacity)
    }

    /// Counts a lookup of the key of `hash` (a well-mixed 64-bit hash), hit or miss.
    mutating func noteLookup(_ hash: UInt64) { sketch.increment(hash) }

    /// Whether the key of `hash`, not in the cache, may come in; `victim` is the hash of the entry it would evict
    /// (nil when there is room).
    mutating func admits(_ hash: UInt64, evicting victim: UInt64?) -> Bool {
        guard doorkeeper.admits(hash) else { return false }
        guard let victim else { return true }
        return sketch.frequency(hash) > sketch.frequency(victim)
    }
}

/// A count-min sketch of 4-bit counters: how often each key was counted lately, never under-estimated (a key shares
/// its four counters with others, so it may read a little high). Once it has counted ten times as many keys as the
/// cache holds, every counter is halved, so that old popularity fades. A key's four counters lie in one 64-byte
/// block (one word of each pair of its block's eight), as in Caffeine's sketch: a lookup touches one cache line,
/// not four — with four, counting cost the hottest reads (2 µs each) about a tenth of their time.
struct FrequencySketch {
    /// Sixteen 4-bit counters a word, eight words a block.
    private var words: [UInt64] = []
    private let blockMask: Int
    private var counted = 0
    private let sampleSize: Int

    /// A sketch for a cache of `capacity` entries: sixteen counters (one word) an entry, as Caffeine sizes its sketch:
    /// with eight, reads cycling over three times as many keys as a small cache holds set its counters high enough
    /// by collision that a quarter of the keys it held were swapped for others read no more often.
    init(capacity: Int) {
        let counters = Int.powerOfTwo(atLeast: max(capacity, 128) * 16)
        blockMask = counters / 128 - 1
        sampleSize = max(capacity, 1) * 10
    }

    /// The counter of `hash` in `row`: the block from the hash's high half, the word and nibble from its low half.
    @inline(__always) private func position(_ hash: UInt64, _ row: Int) -> (word: Int, shift: UInt64) {
        let block = Int(truncatingIfNeeded: hash >> 32) & blockMask
        let word = block << 3 | row << 1 | Int(truncatingIfNeeded: (hash >> UInt64(row)) & 1)
        return (word, ((hash >> UInt64(8 + row * 4)) & 15) << 2)
    }

    /// Counts `hash` once (its counters saturate at 15).
    mutating func increment(_ hash: UInt64) {
        if words.isEmpty { words = [UInt64](repeating: 0, count: (blockMask + 1) * 8) }
        for row in 0..<4 {
            let (w, shift) = position(hash, row)
            if (words[w] >> shift) & 15 < 15 { words[w] &+= 1 << shift }
        }
        counted += 1
        if counted >= sampleSize { halve() }
    }

    /// How often `hash` was counted lately (the least of its counters).
    func frequency(_ hash: UInt64) -> Int {
        guard !words.isEmpty else { return 0 }
        var least = 15
        for row in 0..<4 {
            let (w, shift) = position(hash, row)
            least = min(least, Int((words[w] >> shift) & 15))
        }
        return least
    }

    /// Halves every counter (and the count of keys counted).
    private mutating func halve() {
        for i in words.indices { words[i] = (words[i] >> 1) & 0x7777_7777_7777_7777 }
        counted /= 2
    }
}
