import CloudletCore

extension CRC32C {
    /// The CRC-32C of `a || b` from `crcA = checksum(a)`, `crcB = checksum(b)` and `b.count`, without reading the
    /// bytes again (zlib's `crc32_combine`, by multiplying with x^(8·lengthB) modulo the polynomial).
    ///
    /// Lets ``Log/stage(type:payload:)`` checksum a payload before it holds the lock and fold in the header (which
    /// holds the LSN, known only under the lock) in O(log n).
    static func combine(_ crcA: UInt32, _ crcB: UInt32, lengthB: Int) -> UInt32 {
        multiplyModP(xPow2nModP(UInt64(lengthB), 3), crcA) ^ crcB
    }

    /// The reflected Castagnoli polynomial.
    private static let polynomial: UInt32 = 0x82F6_3B78

    /// x^(2^k) mod P for k = 0…31.
    private static let x2nTable: [UInt32] = {
        var table = [UInt32](repeating: 0, count: 32)
        var p: UInt32 = 1 << 30  // x^1
        table[0] = p
        for n in 1..<32 {
            p = multiplyModP(p, p)
            table[n] = p
        }
        return table
    }()

    /// a·b mod P in the reflected bit order.
    private static func multiplyModP(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var m: UInt32 = 1 << 31
        var p: UInt32 = 0
        var b = b
        while true {
            if a & m != 0 {
                p ^= b
                if a & (m &- 1) == 0 { break }
            }
            m >>= 1
            b = b & 1 != 0 ? (b >> 1) ^ polynomial : b >> 1
        }
        return p
    }

    /// x^(n·2^k) mod P.
    private static func xPow2nModP(_ n: UInt64, _ k: Int) -> UInt32 {
        var p: UInt32 = 1 << 31  // x^0 == 1
        var n = n
        var k = k
        while n != 0 {
            if n & 1 != 0 { p = multiplyModP(x2nTable[k & 31], p) }
            n >>= 1
            k += 1
        }
        return p
    }
}
