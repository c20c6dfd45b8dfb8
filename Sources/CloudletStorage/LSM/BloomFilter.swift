import CloudletCore

/// The hash of keys for bloom filters: 64-bit FNV-1a (Fowler, Noll, Vo: offset basis 0xcbf29ce484222325, prime
/// 0x100000001b3, each byte XORed in then multiplied) with the SplitMix64 finalizer on top, because FNV-1a alone
/// mixes its last bytes poorly into the high bits, which double hashing uses. Part of the on-disk format: a filter
/// is only as good as the reader's hash being the writer's (SortedRunFormat.md, "Filter block").
public enum KeyHash {
    /// The 64-bit hash of a key's bytes.
    public static func hash(_ key: some ContiguousByteCollection) -> UInt64 {
        key.withUnsafeBytes { bytes in
            var h: UInt64 = 0xcbf2_9ce4_8422_2325
            for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
            return SplitMix64.mix(h)
        }
    }
}

/// The bloom filter of a format-version-1 run (``BlockedBloomFilter`` replaced it in version 2; runs written before
/// are still read): `bitsPerKey` bits a key, `k = round(bitsPerKey × ln 2)` probes (1…30)
/// by double hashing (Kirsch–Mitzenmacher): probe i sets bit `(h + i × δ) mod m`, where h is ``KeyHash`` and δ is
/// h rotated by 21 bits, forced odd. No false negatives; about 1% false positives at 10 bits a key.
///
/// Encoded as one byte k followed by the bit array (bit j is bit `j % 8` of byte `j / 8`).
public struct BloomFilter: Sendable, Equatable {
    /// How many bits a key sets (k).
    public let probes: Int
    /// The bit array.
    public let bits: [UInt8]

    /// A filter over the keys with these hashes.
    public init(hashes: [UInt64], bitsPerKey: Int) {
        precondition(bitsPerKey >= 1)
        probes = min(30, max(1, Int((Double(bitsPerKey) * 0.69).rounded())))
        var bits = [UInt8](repeating: 0, count: (max(64, hashes.count * bitsPerKey) + 7) / 8)
        let m = UInt64(bits.count * 8)
        for h in hashes {
            Self.forEachProbe(h, probes: probes, m: m) { bits[Int($0 >> 3)] |= 1 << UInt8($0 & 7) }
        }
        self.bits = bits
    }

    /// Decodes a filter block's contents; nil if they are malformed.
    public init?(encoded: [UInt8]) {
        guard encoded.count >= 2, (1...30).contains(encoded[0]) else { return nil }
        probes = Int(encoded[0])
        bits = Array(encoded[1...])
    }

    /// The filter block's contents: k, then the bits.
    public var encoded: [UInt8] { [UInt8(probes)] + bits }

    /// False only if the key with this hash was certainly not added.
    /// Stops at the first probe that finds its bit clear: a key that was not added — most lookups, in most runs —
    /// costs about two probes (each a 64-bit division), not all k.
    public func mayContain(hash h: UInt64) -> Bool {
        let m = UInt64(bits.count * 8)
        let delta = Self.delta(h)
        var g = h
        return bits.withUnsafeBufferPointer { b in
            for _ in 0..<probes {
                let bit = g % m
                if b[Int(bit >> 3)] & (1 << UInt8(bit & 7)) == 0 { return false }
                g &+= delta
            }
            return true
        }
    }

    public func mayContain(_ key: [UInt8]) -> Bool { mayContain(hash: KeyHash.hash(key)) }

    /// The step between probes: the hash rotated by 21 bits, forced odd.
    @inline(__always)
    private static func delta(_ h: UInt64) -> UInt64 { ((h >> 21) | (h << 43)) | 1 }

    @inline(__always)
    private static func forEachProbe(_ h: UInt64, probes: Int, m: UInt64, _ body: (UInt64) -> Void) {
        let delta = delta(h)
        var g = h
        for _ in 0..<probes {
            body(g % m)
            g &+= delta
        }
    }
}
