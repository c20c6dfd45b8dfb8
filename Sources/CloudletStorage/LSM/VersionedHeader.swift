import CloudletCore

/// The 16-byte header that opens a sorted run and a manifest (SortedRunFormat.md): an 8-byte magic, the format
/// version (u16), flags (u16, zero) and the CRC32C of those 12 bytes.
enum VersionedHeader {
    static let size = 16

    static func encode(magic: [UInt8], version: UInt16) -> [UInt8] {
        precondition(magic.count == 8)
        var w = ByteWriter(capacity: size)
        w.raw(magic)
        w.u16(version)
        w.u16(0)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// What is wrong with a header (`bytes`: the file's first 16 bytes, or fewer), nil if nothing.
    enum Defect: Error {
        /// Not this kind of file, or damaged.
        case damaged(String)
        /// Intact, but of a version (or with flags) this code does not know.
        case unsupported(String)

        var reason: String {
            switch self {
            case .damaged(let r), .unsupported(let r): return r
            }
        }
    }

    /// `versions`: the format versions the reader knows.
    static func check(_ bytes: [UInt8], magic: [UInt8], versions: ClosedRange<UInt16>) -> Defect? {
        guard bytes.count >= size else { return .damaged("file too short for a header (\(bytes.count) bytes)") }
        guard Array(bytes[0..<8]) == magic else { return .damaged("bad header magic") }
        guard bytes.loadLE(UInt32.self, at: 12) == CRC32C.checksum(bytes[0..<12]) else {
            return .damaged("header CRC mismatch")
        }
        let found = bytes.loadLE(UInt16.self, at: 8)
        guard versions.contains(found) else { return .unsupported("unsupported format version \(found)") }
        guard bytes.loadLE(UInt16.self, at: 10) == 0 else { return .unsupported("unknown header flags") }
        return nil
    }
}
