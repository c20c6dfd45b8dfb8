/// A usage error: exit 64 with the message and a pointer to `--help`.
struct UsageError: Error {
    var message: String
}

/// Hand-written option parsing (no packages beyond the toolchain): `--name value`, `--name=value`, boolean flags,
/// repeatable options, and `--help`/`-h` anywhere, which prints the command's help to stdout and exits 0.
struct Options {
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []

    init(_ args: [String], valued: Set<String>, flags allowed: Set<String>, help: String) throws {
        var i = 0
        while i < args.count {
            var a = args[i]
            var inline: String?
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                inline = String(a[a.index(after: eq)...])
                a = String(a[..<eq])
            }
            if a == "--help" || a == "-h" {
                print(help)
                exit(0)
            } else if valued.contains(a) {
                if let inline {
                    values[a, default: []].append(inline)
                } else {
                    guard i + 1 < args.count else { throw UsageError(message: "\(a) needs a value") }
                    values[a, default: []].append(args[i + 1])
                    i += 1
                }
            } else if allowed.contains(a) {
                guard inline == nil else { throw UsageError(message: "\(a) takes no value") }
                flags.insert(a)
            } else {
                throw UsageError(message: a.hasPrefix("-") ? "unknown option \(a)" : "unexpected argument '\(a)'")
            }
            i += 1
        }
    }

    /// The last value given for `name`.
    subscript(_ name: String) -> String? { values[name]?.last }
    /// Every value given for a repeatable option.
    func all(_ name: String) -> [String] { values[name] ?? [] }
    func has(_ flag: String) -> Bool { flags.contains(flag) }

    func required(_ name: String, _ what: String) throws -> String {
        guard let v = self[name] else { throw UsageError(message: "\(name) \(what) is required") }
        return v
    }

    func uint64(_ name: String) throws -> UInt64? {
        guard let v = self[name] else { return nil }
        guard let n = parseSize(v) else { throw UsageError(message: "\(name) needs a non-negative number, not '\(v)'") }
        return n
    }

    func int(_ name: String) throws -> Int? {
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

import Foundation
