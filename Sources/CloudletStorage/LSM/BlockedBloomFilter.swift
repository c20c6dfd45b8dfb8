/// A cache-local bloom filter (format version 2's filter block, and every memtable layer's): the bits are cut into
/// 512-bit blocks (64 bytes, one cache line); a key's ``KeyHash`` picks one block with its high 32 bits and sets `k`
/// bits inside it, chosen by its low 32 bits. A probe of a key present in the run — the run a point read finds its
/// key in — touches one cache line where ``BloomFilter`` touched `k` (seven at ten bits a key) scattered over the
/// whole filter, each a likely cache miss once filters outgrow the CPU's caches; and it costs no division. (On our
/// 2-core VM the spread filter's misses overlapped enough that reads got no faster: Benchmarks/README.md.)
///
/// Packing a key's bits into one block raises the false-positive rate a little (blocks fill unevenly): about 1.0 %
/// at ten bits a key, against 0.85 % spread (the test bounds both).
///
/// Probe positions, as SortedRunFormat.md gives them: block `b = (h >> 32) × B >> 32` for `B` blocks; with
/// `g₀ = h mod 2³²` and `gᵢ₊₁ = gᵢ × 0x9E3779B9 mod 2³²`, probe `i` (0 ≤ i < k) is bit `gᵢ >> 23` of block `b`
/// (bit `j` of a block is bit `j % 8` of its byte `j / 8`).
public struct BlockedBloomFilter: Sendable, Equatable {
    /// Bytes a block: one cache line.
    public static let blockSize = 64
    /// How many bits a key sets (k), 1…16.
    public let probes: Int
    /// How many blocks (B ≥ 1).
    public let blockCount: Int
    /// The blocks, at `start` in `storage` (room for a 64-byte aligned start: the array's own storage is not).
    private let storage: [UInt8]
    private let start: Int

    /// A filter over the keys with these hashes, `bitsPerKey` bits a key (rounded up to whole blocks).
    public init(hashes: [UInt64], bitsPerKey: Int) {
        precondition(bitsPerKey >= 1)
        let probes = min(16, max(1, Int((Double(bitsPerKey) * 0.69).rounded())))
        let blockCount = max(1, (hashes.count * bitsPerKey + 511) / 512)
        var storage = [UInt8](repeating: 0, count: blockCount * Self.blockSize + Self.blockSize - 1)
        let start = Self.alignedStart(storage)
        storage.withUnsafeMutableBufferPointer { b in
            for h in hashes {
                Self.forEachProbe(h, probes: probes, blocks: blockCount) { byte, mask in b[start + byte] |= mask }
            }
        }
        self.probes = probes
        self.blockCount = blockCount
        self.storage = storage
        self.start = start
    }

    /// Decodes a filter block's contents (`k`, then the blocks); nil if they are malformed.
    public init?(encoded: [UInt8]) {
        guard encoded.count >= 1 + Self.blockSize, (encoded.count - 1) % Self.blockSize == 0,
            (1...16).contains(encoded[0])
        else { return nil }
        probes = Int(encoded[0])
        blockCount = (encoded.count - 1) / Self.blockSize
        var storage = [UInt8](repeating: 0, count: encoded.count - 1 + Self.blockSize - 1)
        let start = Self.alignedStart(storage)
        storage.replaceSubrange(start..<(start + encoded.count - 1), with: encoded[1...])
        self.storage = storage
        self.start = start
    }

    /// The filter block's contents: `k`, then the blocks.
    public var encoded: [UInt8] { [UInt8(probes)] + bits }

    /// The blocks' bytes.
    public var bits: ArraySlice<UInt8> { storage[start..<(start + blockCount * Self.blockSize)] }

    /// False only if the key with this hash was certainly not added.
    public func mayContain(hash h: UInt64) -> Bool {
        storage.withUnsafeBufferPointer { b in
            let base = start + Self.block(h, blocks: blockCount) * Self.blockSize
            var g = UInt32(truncatingIfNeeded: h)
            for _ in 0..<probes {
                let bit = Int(g >> 23)
                if b[base + (bit >> 3)] & (1 << UInt8(bit & 7)) == 0 { return false }
                g = g &* Self.multiplier
            }
            return true
        }
    }

    public func mayContain(_ key: [UInt8]) -> Bool { mayContain(hash: KeyHash.hash(key)) }

    public static func == (a: Self, b: Self) -> Bool { a.probes == b.probes && a.bits == b.bits }

    /// The multiplier that steps from one probe to the next: 2³² divided by the golden ratio, odd (so every step is
    /// a bijection of the 32-bit values).
    static let multiplier: UInt32 = 0x9E37_79B9

    /// The block of hash `h`: its high half scaled to `blocks` (a multiplication, not a division).
    @inline(__always)
    static func block(_ h: UInt64, blocks: Int) -> Int { Int(((h >> 32) &* UInt64(blocks)) >> 32) }

    @inline(__always)
    private static func forEachProbe(_ h: UInt64, probes: Int, blocks: Int, _ body: (Int, UInt8) -> Void) {
        let base = block(h, blocks: blocks) * blockSize
        var g = UInt32(truncatingIfNeeded: h)
        for _ in 0..<probes {
            let bit = Int(g >> 23)
            body(base + (bit >> 3), 1 << UInt8(bit & 7))
            g = g &* multiplier
        }
    }

    /// Where in `storage` a 64-byte aligned run of bytes starts (0 if the array is empty).
    private static func alignedStart(_ storage: [UInt8]) -> Int {
        storage.withUnsafeBufferPointer { b in
            guard let base = b.baseAddress else { return 0 }
            let address = UInt(bitPattern: base)
            return Int((UInt(blockSize) - address % UInt(blockSize)) % UInt(blockSize))
        }
    }
}

/// A run's bloom filter as its format version has it: the spread filter of version 1 or the cache-local one of
/// version 2.
enum RunFilter: Sendable {
    case spread(BloomFilter)
    case blocked(BlockedBloomFilter)

    /// Decodes the filter block of a run of `formatVersion`; nil if it is malformed.
    init?(encoded: [UInt8], formatVersion: UInt16) {
        if formatVersion >= 2 {
            guard let f = BlockedBloomFilter(encoded: encoded) else { return nil }
            self = .blocked(f)
        } else {
            guard let f = BloomFilter(encoded: encoded) else { return nil }
            self = .spread(f)
        }
    }

    func mayContain(hash: UInt64) -> Bool {
        switch self {
        case .spread(let f): return f.mayContain(hash: hash)
        case .blocked(let f): return f.mayContain(hash: hash)
        }
    }

    func mayContain(_ key: [UInt8]) -> Bool { mayContain(hash: KeyHash.hash(key)) }
}
