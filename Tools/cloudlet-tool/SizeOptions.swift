import CloudletCommandLine
import Foundation

/// Sizes and counts in cloudlet-tool's options: `123`, `64k`, `64KiB`, `10M`, `1G` (binary multiples).
extension CommandLineOptions {
    /// The value of `name` as a size, nil if it was not given; throws "NAME needs a non-negative number, not 'V'".
    func uint64(_ name: String) throws(UsageError) -> UInt64? {
        guard let v = self[name] else { return nil }
        guard let n = parseSize(v) else { throw UsageError(message: "\(name) needs a non-negative number, not '\(v)'") }
        return n
    }

    /// ``uint64(_:)`` as an `Int` (clamped).
    func int(_ name: String) throws(UsageError) -> Int? {
        try uint64(name).map { Int(clamping: $0) }
    }
}

/// `123`, `64k`, `64KiB`, `10M`, `1G` (binary multiples).
func parseSize(_ s: String) -> UInt64? {
    let lower = s.lowercased().replacingOccurrences(of: "ib", with: "").replacingOccurrences(of: "b", with: "")
    let units: [(String, UInt64)] = [("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40)]
    for (suffix, factor) in units where lower.hasSuffix(suffix) {
        guard let n = UInt64(lower.dropLast()) else { return nil }
        return n.multipliedReportingOverflow(by: factor).overflow ? nil : n * factor
    }
    return UInt64(lower)
}
