import CloudletCore

/// TinyLFU's "doorkeeper" in front of a cache: a small bloom filter of the keys looked up lately, so that a cache
/// admits a key only on its second miss within a window. A one-off read (a uniform scan of a store much larger
/// than the cache) then costs neither an insertion nor the eviction — and, for decoded records, the deallocation —
/// it would force, while keys read again soon, the hot ones, get in on their second read.
///
/// The window is four times the cache's capacity: after that many keys the filter is cleared. Two bits a key in a
/// filter of about eight bits per key of the window (a power of two), so a key never seen passes for one seen
/// about 2 % of the time on average over a window (5 % just before it is cleared).
struct Doorkeeper {
    private var words: [UInt64] = []
    private var noted = 0
    private let window: Int
    private let mask: UInt64

    /// A doorkeeper for a cache of `capacity` entries.
    init(capacity: Int) {
        window = max(capacity, 1) * 4
        mask = UInt64(max(1024, Int.powerOfTwo(atLeast: window * 8)) - 1)
    }

    /// Whether `hash` (a well-mixed 64-bit hash of the key) was noted in this window; notes it if not.
    mutating func admits(_ hash: UInt64) -> Bool {
        if words.isEmpty { words = [UInt64](repeating: 0, count: Int(mask + 1) / 64) }
        let a = Int(hash & mask), b = Int((hash >> 32) & mask)
        let wa = a >> 6, ba = UInt64(1) << UInt64(a & 63)
        let wb = b >> 6, bb = UInt64(1) << UInt64(b & 63)
        if words[wa] & ba != 0 && words[wb] & bb != 0 { return true }
        if noted >= window {
            for i in words.indices { words[i] = 0 }
            noted = 0
        }
        words[wa] |= ba
        words[wb] |= bb
        noted += 1
        return false
    }
}
