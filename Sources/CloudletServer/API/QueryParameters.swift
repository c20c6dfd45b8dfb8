import CloudletWire

/// Numbers from a request's query string. Swift traps on `Int(Double.nan)` and on overflow, and `Double(String)`
/// accepts `nan`, `inf` and hex: untrusted text becomes a number here and nowhere else, and anything but a plain
/// decimal inside the allowed range is a `BAD_REQUEST` naming the parameter.
extension HTTPRequest {
    /// The query parameter `name` as a plain decimal (`12`, `0.5`; no sign, exponent, `nan` or `inf`) within
    /// `range`; nil when absent or empty.
    func decimalParameter(_ name: String, in range: ClosedRange<Double>, unit: String) throws -> Double? {
        guard let text = queryParameter(name), !text.isEmpty else { return nil }
        let bad = APIError.badRequest(
            "query parameter \(name) must be a number of \(unit) from \(Self.plain(range.lowerBound)) to \(Self.plain(range.upperBound)), not '\(text.prefix(40))'"
        )
        guard let value = Self.plainDecimal(text), range.contains(value) else { throw bad }
        return value
    }

    /// `text` as a double when it is digits with at most one decimal point (at most 24 characters); nil otherwise.
    static func plainDecimal(_ text: String) -> Double? {
        var digits = 0
        var points = 0
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digits += 1
            case UInt8(ascii: "."): points += 1
            default: return nil
            }
        }
        guard digits > 0, points <= 1, text.utf8.count <= 24, let d = Double(text), d.isFinite else { return nil }
        return d
    }

    private static func plain(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
    }
}
