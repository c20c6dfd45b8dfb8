import CloudletCore

/// CloudKit's naming rules, checked before anything is written. Every failure is
/// ``CloudletError/Code/invalidArguments`` with a message naming the offending name and the rule it breaks.
package enum Names {
    static let maxLength = 255

    /// `iCloud.` followed by a reverse-DNS identifier (letters, digits, `-`, `_`, `.`), at most 255 characters.
    static func validateContainer(_ id: String) throws {
        if !isValidContainer(id) {
            throw CloudletError(
                .badContainer,
                "container identifier '\(id)' is invalid: it must be 'iCloud.' followed by a reverse-DNS name "
                    + "(letters, digits, '-', '_', '.'), at most \(maxLength) characters")
        }
    }

    /// Checked byte by byte (every allowed byte is ASCII): every request names its container, and the `Character`
    /// and Foundation string searches this replaced were ~3 % of a lookup's CPU over HTTP (perf).
    private static func isValidContainer(_ id: String) -> Bool {
        let prefix = "iCloud.".utf8
        let u = id.utf8
        guard u.count > prefix.count, u.count <= maxLength, u.starts(with: prefix) else { return false }
        // Starting as if after a dot: a leading dot, like two in a row, is refused.
        var previous = UInt8(ascii: ".")
        for b in u.dropFirst(prefix.count) {
            let dot = b == UInt8(ascii: ".")
            guard isAlnum(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || dot else { return false }
            if dot && previous == UInt8(ascii: ".") { return false }
            previous = b
        }
        return previous != UInt8(ascii: ".")  // no trailing dot
    }

    /// Record type and field names: start with a letter, then letters, digits and `_`, at most 255 characters.
    package static func validateIdentifier(_ name: String, what: String) throws {
        let u = name.utf8
        guard let first = u.first, isAlpha(first), u.count <= maxLength,
            u.allSatisfy({ isAlnum($0) || $0 == UInt8(ascii: "_") })
        else {
            throw CloudletError.invalid(
                "\(what) '\(name)' is invalid: it must start with a letter and contain only letters, digits and "
                    + "underscores, at most \(maxLength) characters")
        }
    }

    /// Record names: 1–255 printable ASCII characters, not starting with `_` (reserved for system records).
    package static func validateRecordName(_ name: String) throws {
        let u = name.utf8
        guard !u.isEmpty, u.count <= maxLength, u.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw CloudletError.invalid(
                "record name '\(name)' is invalid: it must be 1–\(maxLength) printable ASCII characters")
        }
        guard u.first != UInt8(ascii: "_") else {
            throw CloudletError.invalid("record name '\(name)' is invalid: names starting with '_' are reserved")
        }
    }

    /// Zone names for creation: 1–255 printable ASCII characters, not starting with `_` (`_defaultZone` is reserved).
    package static func validateZoneName(_ name: String) throws {
        let u = Array(name.utf8)
        guard !u.isEmpty, u.count <= maxLength, u.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw CloudletError.invalid(
                "zone name '\(name)' is invalid: it must be 1–\(maxLength) ASCII characters without spaces")
        }
        guard u[0] != UInt8(ascii: "_") else {
            throw CloudletError.invalid("zone name '\(name)' is invalid: zone names starting with '_' are reserved")
        }
    }

    /// User record names: 1–255 printable ASCII characters.
    static func validateUser(_ name: String) throws {
        let u = Array(name.utf8)
        guard !u.isEmpty, u.count <= maxLength, u.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw CloudletError.invalid("user name '\(name)' is invalid: it must be 1–\(maxLength) ASCII characters")
        }
    }

    private static func isAlpha(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
    }
    private static func isAlnum(_ c: UInt8) -> Bool { isAlpha(c) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) }
}
