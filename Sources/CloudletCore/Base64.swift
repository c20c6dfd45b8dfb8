/// Base64 (RFC 4648) without Foundation: the standard alphabet with padding (tokens, markers, BYTES fields on the
/// wire, exports) and base64url without padding (§5: signed asset URLs and receipts).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let reverse = reverseTable(alphabet)
    private static let urlReverse = reverseTable(urlAlphabet)

    private static func reverseTable(_ alphabet: [UInt8]) -> [Int8] {
        var t = [Int8](repeating: -1, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = Int8(i) }
        return t
    }

    public static func encode(_ b: [UInt8]) -> String { encode(b, alphabet, padded: true) }

    /// base64url without padding, the form a URL carries as it is.
    public static func encodeURL(_ b: [UInt8]) -> String { encode(b, urlAlphabet, padded: false) }

    private static func encode(_ b: [UInt8], _ alphabet: [UInt8], padded: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((b.count + 2) / 3 * 4)
        func digit(_ v: UInt32, _ shift: UInt32) -> UInt8 { alphabet[Int((v >> shift) & 63)] }
        var i = 0
        while i + 3 <= b.count {
            let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2])
            out.append(digit(v, 18))
            out.append(digit(v, 12))
            out.append(digit(v, 6))
            out.append(digit(v, 0))
            i += 3
        }
        let rest = b.count - i
        if rest > 0 {
            var v = UInt32(b[i]) << 16
            if rest == 2 { v |= UInt32(b[i + 1]) << 8 }
            out.append(digit(v, 18))
            out.append(digit(v, 12))
            if rest == 2 { out.append(digit(v, 6)) } else if padded { out.append(UInt8(ascii: "=")) }
            if padded { out.append(UInt8(ascii: "=")) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ s: String) -> [UInt8]? {
        let chars = Array(s.utf8)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        var i = 0
        while i < chars.count {
            var v: UInt32 = 0
            var pad = 0
            for k in 0..<4 {
                let c = chars[i + k]
                if c == UInt8(ascii: "=") {
                    guard i + 4 == chars.count, k >= 2 else { return nil }
                    pad += 1
                    v <<= 6
                } else {
                    guard pad == 0 else { return nil }
                    let d = reverse[Int(c)]
                    guard d >= 0 else { return nil }
                    v = v << 6 | UInt32(d)
                }
            }
            out.append(UInt8((v >> 16) & 0xFF))
            if pad < 2 { out.append(UInt8((v >> 8) & 0xFF)) }
            if pad < 1 { out.append(UInt8(v & 0xFF)) }
            i += 4
        }
        return out
    }

    /// The bytes of unpadded base64url text, only of its one canonical spelling (what ``encodeURL(_:)`` gives): no
    /// padding, no character of the standard alphabet's `+` and `/`, no length of 4n + 1, and the last character's
    /// bits past the data zero — so that no two texts decode to the same bytes. Nil for anything else.
    public static func decodeURL<S: StringProtocol>(_ s: S) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count / 4 * 3 + 2)
        var v: UInt32 = 0
        var bits: UInt32 = 0
        for c in s.utf8 {
            let d = urlReverse[Int(c)]
            guard d >= 0 else { return nil }
            v = v << 6 | UInt32(d)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: v >> bits))
                v &= (1 << bits) - 1
            }
        }
        // 4n characters leave 0 bits, 4n + 2 leave 4 and 4n + 3 leave 2, which must be zero; 4n + 1 leave 6.
        guard bits < 6, v == 0 else { return nil }
        return out
    }
}
