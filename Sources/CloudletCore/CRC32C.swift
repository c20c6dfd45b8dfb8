import CCRC32C

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every frame, segment header and
/// checkpoint. With the CPU's CRC-32C instructions where it has them (x86-64 SSE 4.2, ARMv8 CRC; the CCRC32C target),
/// else slicing-by-8 tables (about 1–2 GB/s in a release build); the two are tested equal.
public enum CRC32C {
    /// Whether ``checksum(_:continuing:)`` uses the CPU's instructions.
    public static let usesHardware = ccrc32c_hardware_available() != 0

    /// The checksum of `bytes`, continuing from `crc` (pass the result of a previous call to checksum in pieces).
    public static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard usesHardware, let base = bytes.baseAddress else { return softwareChecksum(bytes, continuing: crc) }
        return ccrc32c_hardware(crc, base, bytes.count)
    }

    private static let tables: [[UInt32]] = {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for i in 0..<256 {
            var crc = UInt32(i)
            for _ in 0..<8 { crc = (crc & 1) != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[0][i] = crc
        }
        for i in 0..<256 {
            for t in 1..<8 {
                let prev = tables[t - 1][i]
                tables[t][i] = (prev >> 8) ^ tables[0][Int(prev & 0xFF)]
            }
        }
        return tables
    }()

    /// ``checksum(_:continuing:)`` with the tables, whatever the CPU has.
    public static func softwareChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        var c = ~crc
        let tables = Self.tables
        var i = 0
        let n = bytes.count
        tables.withUnsafeBufferPointer { t in
            let t0 = t[0], t1 = t[1], t2 = t[2], t3 = t[3], t4 = t[4], t5 = t[5], t6 = t[6], t7 = t[7]
            t0.withUnsafeBufferPointer { t0 in
            t1.withUnsafeBufferPointer { t1 in
            t2.withUnsafeBufferPointer { t2 in
            t3.withUnsafeBufferPointer { t3 in
            t4.withUnsafeBufferPointer { t4 in
            t5.withUnsafeBufferPointer { t5 in
            t6.withUnsafeBufferPointer { t6 in
            t7.withUnsafeBufferPointer { t7 in
                while n - i >= 8 {
                    let lo = c ^ (UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16
                        | UInt32(bytes[i + 3]) << 24)
                    c = t7[Int(lo & 0xFF)] ^ t6[Int((lo >> 8) & 0xFF)] ^ t5[Int((lo >> 16) & 0xFF)]
                        ^ t4[Int(lo >> 24)] ^ t3[Int(bytes[i + 4])] ^ t2[Int(bytes[i + 5])]
                        ^ t1[Int(bytes[i + 6])] ^ t0[Int(bytes[i + 7])]
                    i += 8
                }
                while i < n {
                    c = (c >> 8) ^ t0[Int((c ^ UInt32(bytes[i])) & 0xFF)]
                    i += 1
                }
            }}}}}}}}
        }
        return ~c
    }

    /// The checksum of a byte array (or a slice of one).
    public static func checksum(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, continuing: crc) }
    }

    /// The checksum of part of a byte array.
    public static func checksum(_ bytes: ArraySlice<UInt8>, continuing crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, continuing: crc) }
    }
}
