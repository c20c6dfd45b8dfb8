extension Array where Element == UInt8 {
    /// The little-endian integer at `offset`. The caller has checked the bounds (a bug traps); for fixed-layout
    /// headers whose size is known, where ``CloudletCore/ByteReader``'s throwing reads would only add noise and
    /// cost in the byte-by-byte resync scan.
    @inline(__always)
    package func loadLE<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        precondition(offset >= 0 && offset + MemoryLayout<T>.size <= count, "read past a checked header")
        return withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }
}
