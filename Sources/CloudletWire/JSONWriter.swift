/// Writes JSON straight into a byte buffer, without building a tree: `object { key("a"); string("b") }`.
///
/// Commas are placed automatically. Strings are escaped per RFC 8259; doubles use Swift's shortest round-trip
/// form, and the non-finite ones (which JSON cannot hold) are written as the strings `"NaN"`, `"Infinity"`,
/// `"-Infinity"`.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    /// For each open container: whether it already has a member (so the next one needs a comma).
    private var hasMember: [Bool] = []
    /// Set by `key(_:)`: the next value is the member's value, not a new member.
    private var afterKey = false

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    private mutating func separate() {
        if afterKey {
            afterKey = false
            return
        }
        if let last = hasMember.last {
            if last { bytes.append(UInt8(ascii: ",")) }
            hasMember[hasMember.count - 1] = true
        }
    }

    public mutating func object(_ body: (inout JSONWriter) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "{"))
        hasMember.append(false)
        body(&self)
        hasMember.removeLast()
        bytes.append(UInt8(ascii: "}"))
    }

    public mutating func array(_ body: (inout JSONWriter) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "["))
        hasMember.append(false)
        body(&self)
        hasMember.removeLast()
        bytes.append(UInt8(ascii: "]"))
    }

    /// Starts an object member; the next call writes its value.
    public mutating func key(_ k: String) {
        separate()
        appendString(k)
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    public mutating func string(_ s: String) {
        separate()
        appendString(s)
    }

    public mutating func int(_ v: Int64) {
        separate()
        bytes.append(contentsOf: String(v).utf8)
    }

    public mutating func double(_ v: Double) {
        guard v.isFinite else { return string(v.isNaN ? "NaN" : v < 0 ? "-Infinity" : "Infinity") }
        separate()
        bytes.append(contentsOf: v.description.utf8)
    }

    public mutating func bool(_ v: Bool) {
        separate()
        bytes.append(contentsOf: (v ? "true" : "false").utf8)
    }

    public mutating func null() {
        separate()
        bytes.append(contentsOf: "null".utf8)
    }

    /// Writes a parsed value back out.
    public mutating func value(_ v: JSONValue) {
        switch v {
        case .null: null()
        case .bool(let b): bool(b)
        case .number(let n):
            separate()
            bytes.append(contentsOf: n.text.utf8)
        case .string(let s): string(s)
        case .array(let items): array { w in for item in items { w.value(item) } }
        case .object(let members):
            object { w in
                for k in members.keys.sorted() {
                    w.key(k)
                    w.value(members[k]!)
                }
            }
        }
    }

    // Convenience members.
    public mutating func member(_ k: String, _ s: String) {
        key(k)
        string(s)
    }
    public mutating func member(_ k: String, _ v: Int64) {
        key(k)
        int(v)
    }
    public mutating func member(_ k: String, _ v: Bool) {
        key(k)
        bool(v)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// A string literal. The bytes between characters that need escaping are copied in runs (one copy for the
    /// usual string, which has none): appending byte by byte cost ~1 k instructions a string (callgrind).
    private mutating func appendString(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var run = 0  // where the bytes not yet copied start
            for k in utf8.indices {
                let c = utf8[k]
                guard c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<k]))
                run = k + 1
                switch c {
                case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                default:
                    bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    bytes.append(Self.hexDigits[Int(c >> 4)])
                    bytes.append(Self.hexDigits[Int(c & 0xF)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
