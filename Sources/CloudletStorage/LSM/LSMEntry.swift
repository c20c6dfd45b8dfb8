#if canImport(Glibc)
import Glibc
#endif

/// One version of a key in the LSM tree: a value or a tombstone, stamped with the sequence number of the write
/// that made it. For equal keys the entry with the higher sequence is the newer one and wins every merge; a
/// tombstone hides every older entry of its key. Keys and values are byte strings; keys are ordered by unsigned
/// lexicographic byte comparison (``LSMKey/compare(_:_:)``).
public struct LSMEntry: Sendable, Hashable, CustomStringConvertible {
    /// What an entry says about its key. The raw value is the kind byte on disk (SortedRunFormat.md, "Data entry").
    public enum Kind: UInt8, Sendable, Hashable {
        /// The key was deleted; ``LSMEntry/value`` is empty.
        case tombstone = 0
        /// The key holds ``LSMEntry/value``.
        case value = 1
    }

    public var key: [UInt8]
    public var kind: Kind
    /// The sequence number of the write (the caller's: a log LSN, or a counter).
    public var sequence: UInt64
    /// The value; empty for a tombstone.
    public var value: [UInt8]

    public init(key: [UInt8], kind: Kind, sequence: UInt64, value: [UInt8] = []) {
        precondition(kind == .value || value.isEmpty, "a tombstone has no value")
        self.key = key
        self.kind = kind
        self.sequence = sequence
        self.value = value
    }

    /// A value entry.
    public static func put(_ key: [UInt8], _ value: [UInt8], sequence: UInt64) -> LSMEntry {
        LSMEntry(key: key, kind: .value, sequence: sequence, value: value)
    }

    /// A tombstone.
    public static func delete(_ key: [UInt8], sequence: UInt64) -> LSMEntry {
        LSMEntry(key: key, kind: .tombstone, sequence: sequence)
    }

    public var isTombstone: Bool { kind == .tombstone }

    public var description: String {
        "\(LSMKey.printable(key))@\(sequence)" + (isTombstone ? " (deleted)" : " = \(value.count) bytes")
    }
}

/// The order of keys, and small helpers on them.
public enum LSMKey {
    /// Unsigned lexicographic comparison: negative if `a` < `b`, zero if equal, positive if `a` > `b`. A prefix
    /// sorts before the longer key.
    @inline(__always)
    public static func compare(_ a: some ContiguousByteCollection, _ b: some ContiguousByteCollection) -> Int {
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                let n = min(pa.count, pb.count)
                if n > 0 {
                    // Keys that differ at once (most, where each stores only what follows the part it shares with
                    // the one before it) are told apart without a call.
                    let x = pa[0], y = pb[0]
                    if x != y { return Int(x) - Int(y) }
                    let c = memcmp(pa.baseAddress!, pb.baseAddress!, n)
                    if c != 0 { return Int(c) }
                }
                return pa.count - pb.count
            }
        }
    }

    /// How many leading bytes `a` and `b` share, counting at most `limit`.
    static func commonPrefix(_ a: [UInt8], _ b: [UInt8], upTo limit: Int = .max) -> Int {
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                let n = min(limit, pa.count, pb.count)
                var i = 0
                while i + 8 <= n && pa.loadUnaligned(fromByteOffset: i, as: UInt64.self) == pb.loadUnaligned(fromByteOffset: i, as: UInt64.self) {
                    i += 8
                }
                while i < n && pa[i] == pb[i] { i += 1 }
                return i
            }
        }
    }

    /// The 8 bytes of `key` from `offset` as a big-endian integer, missing bytes as zeros: integers that order as
    /// the bytes do (keys equal in them, or differing only in trailing zeros, need a whole comparison).
    @inline(__always)
    static func bigEndianWindow(_ key: UnsafeRawBufferPointer, from offset: Int) -> UInt64 {
        if offset + 8 <= key.count { return UInt64(bigEndian: key.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
        var v: UInt64 = 0
        for i in 0..<8 { v = v << 8 | UInt64(offset + i < key.count ? key[offset + i] : 0) }
        return v
    }

    /// Whether `a` sorts before `b`.
    @inline(__always)
    public static func less(_ a: [UInt8], _ b: [UInt8]) -> Bool { compare(a, b) < 0 }

    /// The key, as text if it is printable ASCII, else as hex: for messages and `dump`.
    public static func printable(_ key: some Collection<UInt8>) -> String {
        if !key.isEmpty, key.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 }) {
            return "\"" + String(decoding: key, as: UTF8.self) + "\""
        }
        return "0x" + hex(key)
    }

    /// The bytes as lowercase hex digits, two a byte.
    public static func hex(_ bytes: some Collection<UInt8>) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// Bytes that can be compared in place: arrays and slices of them.
public protocol ContiguousByteCollection {
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: ContiguousByteCollection where Element == UInt8 {}
extension ArraySlice: ContiguousByteCollection where Element == UInt8 {}
extension UnsafeRawBufferPointer: ContiguousByteCollection {
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try body(self) }
}
extension UnsafeBufferPointer: ContiguousByteCollection where Element == UInt8 {
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(self))
    }
}
