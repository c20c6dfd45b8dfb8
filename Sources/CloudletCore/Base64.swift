/// Standard base64 (RFC 4648): tokens, markers, BYTES fields on the wire, exports. Without Foundation.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let reverse: [Int8] = {
        var t = [Int8](repeating: -1, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = Int8(i) }
        return t
    }()

    public static func encode(_ b: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((b.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= b.count {
            let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2])
            for s in [18, 12, 6, 0] { out.append(alphabet[Int((v >> UInt32(s)) & 63)]) }
            i += 3
        }
        let rest = b.count - i
        if rest > 0 {
            var v = UInt32(b[i]) << 16
            if rest == 2 { v |= UInt32(b[i + 1]) << 8 }
            out.append(alphabet[Int((v >> 18) & 63)])
            out.append(alphabet[Int((v >> 12) & 63)])
            out.append(rest == 2 ? alphabet[Int((v >> 6) & 63)] : UInt8(ascii: "="))
            out.append(UInt8(ascii: "="))
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
}
