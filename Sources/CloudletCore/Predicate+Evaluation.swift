import Foundation

extension Predicate {
    /// Whether `record` matches. `searchable` says which string fields full-text search (`self CONTAINS`) looks
    /// at; nil means every string field.
    public func matches(_ record: Record, searchable: Set<String>? = nil) -> Bool {
        switch self {
        case .all: true
        case .none: false
        case .comparison(let c): c.matches(record, searchable: searchable)
        case .and(let ps): ps.allSatisfy { $0.matches(record, searchable: searchable) }
        case .or(let ps): ps.contains { $0.matches(record, searchable: searchable) }
        case .not(let p): !p.matches(record, searchable: searchable)
        }
    }
}

extension Comparison {
    /// The value this comparison looks at in `record` (a field, or a system field).
    public func operand(in record: Record) -> FieldValue? {
        if let s = SystemField(rawValue: field) { return s.value(in: record) }
        return record.fields[field]
    }

    /// Whether `record` matches. A record without the field matches no comparison (not even a NOT_ one).
    public func matches(_ record: Record, searchable: Set<String>? = nil) -> Bool {
        if field == fullTextField {
            var tokens: Set<String> = []
            for (name, v) in record.fields where searchable?.contains(name) ?? true {
                switch v {
                case .string(let s): tokens.formUnion(TextTokenizer.tokens(s))
                case .list(.string, let items): for case .string(let s) in items { tokens.formUnion(TextTokenizer.tokens(s)) }
                default: break
                }
            }
            return matchTokens(tokens)
        }
        guard let v = operand(in: record) else { return false }
        return matches(v)
    }

    private func matchTokens(_ have: Set<String>) -> Bool {
        let want = Set(value.stringValue.map(TextTokenizer.searchTerms) ?? [])
        guard !want.isEmpty else { return false }
        func has(_ term: String) -> Bool {
            guard let prefix = TextTokenizer.prefix(of: term) else { return have.contains(term) }
            return have.contains { TextTokenizer.begins($0, with: prefix) }
        }
        switch comparator {
        case .containsAllTokens: return want.allSatisfy(has)
        case .containsAnyTokens: return want.contains(where: has)
        default: return false
        }
    }

    /// Whether a field value matches.
    public func matches(_ v: FieldValue) -> Bool {
        switch comparator {
        case .equals: return FieldOrder.equal(v, value)
        case .notEquals: return !FieldOrder.equal(v, value) && FieldOrder.comparable(v, value)
        case .lessThan: return FieldOrder.compare(v, value).map { $0 < 0 } ?? false
        case .lessThanOrEquals: return FieldOrder.compare(v, value).map { $0 <= 0 } ?? false
        case .greaterThan: return FieldOrder.compare(v, value).map { $0 > 0 } ?? false
        case .greaterThanOrEquals: return FieldOrder.compare(v, value).map { $0 >= 0 } ?? false
        case .near:
            guard case .location(let here) = v, case .location(let center) = value, let distance else { return false }
            return Geo.distanceKilometres(here, center) <= distance
        case .containsAllTokens, .containsAnyTokens:
            switch v {
            case .string(let s): return matchTokens(Set(TextTokenizer.tokens(s)))
            case .list(.string, let items):
                var t: Set<String> = []
                for case .string(let s) in items { t.formUnion(TextTokenizer.tokens(s)) }
                return matchTokens(t)
            default: return false
            }
        case .in: return members(value).contains { FieldOrder.equal(v, $0) }
        case .notIn: return !members(value).contains { FieldOrder.equal(v, $0) }
        case .listContains: return members(v).contains { FieldOrder.equal($0, value) }
        case .notListContains: return isList(v) && !members(v).contains { FieldOrder.equal($0, value) }
        case .listContainsAny: return members(value).contains { w in members(v).contains { FieldOrder.equal($0, w) } }
        case .notListContainsAny:
            return isList(v) && !members(value).contains { w in members(v).contains { FieldOrder.equal($0, w) } }
        case .listContainsAll: return members(value).allSatisfy { w in members(v).contains { FieldOrder.equal($0, w) } }
        case .notListContainsAll:
            return isList(v) && !members(value).allSatisfy { w in members(v).contains { FieldOrder.equal($0, w) } }
        case .beginsWith: return prefix(v)
        case .notBeginsWith: return v.stringValue != nil && !prefix(v)
        case .listMemberBeginsWith: return members(v).contains { prefix($0) }
        case .notListMemberBeginsWith: return isList(v) && !members(v).contains { prefix($0) }
        }
    }

    private func prefix(_ v: FieldValue) -> Bool {
        guard let s = v.stringValue, let p = value.stringValue else { return false }
        return s.utf8.starts(with: p.utf8)
    }

    private func members(_ v: FieldValue) -> [FieldValue] {
        if case .list(_, let items) = v { return items }
        return [v]
    }

    private func isList(_ v: FieldValue) -> Bool {
        if case .list = v { return true }
        return false
    }
}

/// How field values compare in predicates and sorts. Numbers compare across INT64 and DOUBLE; strings compare by
/// Unicode scalar values (equality is case-insensitive, as CloudKit documents); references by record name (also
/// against strings, either way round); values of unrelated types do not compare.
public enum FieldOrder {
    /// -1, 0, 1, or nil when the two values do not compare.
    public static func compare(_ a: FieldValue, _ b: FieldValue) -> Int? {
        switch (a, b) {
        case (.int64(let x), .int64(let y)): return x < y ? -1 : x == y ? 0 : 1
        case (.double(let x), .double(let y)): return x < y ? -1 : x == y ? 0 : 1
        case (.int64(let x), .double(let y)): return Double(x) < y ? -1 : Double(x) == y ? 0 : 1
        case (.double(let x), .int64(let y)): return x < Double(y) ? -1 : x == Double(y) ? 0 : 1
        case (.timestamp(let x), .timestamp(let y)): return x < y ? -1 : x == y ? 0 : 1
        case (.string(let x), .string(let y)): return compareScalars(x, y)
        case (.reference(let x), .reference(let y)): return compareScalars(x.recordName, y.recordName)
        case (.reference(let x), .string(let y)): return compareScalars(x.recordName, y)
        case (.string(let x), .reference(let y)): return compareScalars(x, y.recordName)
        case (.bytes(let x), .bytes(let y)): return x.lexicographicallyPrecedes(y) ? -1 : x == y ? 0 : 1
        default: return nil
        }
    }

    /// Strings order by Unicode scalar values, which is the order of their UTF-8 bytes — the order the SORTABLE
    /// index keeps. (Canonically equivalent strings with different scalars are different here; EQUALS on strings
    /// uses ``equal(_:_:)``, which folds case and canonical equivalence.)
    static func compareScalars(_ x: String, _ y: String) -> Int {
        if x.utf8.elementsEqual(y.utf8) { return 0 }
        return x.utf8.lexicographicallyPrecedes(y.utf8) ? -1 : 1
    }

    /// Equality as EQUALS means it (strings case-insensitively).
    public static func equal(_ a: FieldValue, _ b: FieldValue) -> Bool {
        if case .string(let x) = a, case .string(let y) = b { return x == y || x.lowercased() == y.lowercased() }
        if case .location(let x) = a, case .location(let y) = b { return x.latitude == y.latitude && x.longitude == y.longitude }
        if case .asset(let x) = a, case .asset(let y) = b { return x.fileChecksum == y.fileChecksum }
        return compare(a, b) == 0
    }

    static func comparable(_ a: FieldValue, _ b: FieldValue) -> Bool {
        if case .location = a, case .location = b { return true }
        return compare(a, b) != nil || (a.stringValue != nil && b.stringValue != nil)
    }
}

/// Great-circle distances.
public enum Geo {
    public static let earthRadiusKm = 6371.0088

    public static func distanceKilometres(_ a: Location, _ b: Location) -> Double {
        let toRad = Double.pi / 180
        let dLat = (b.latitude - a.latitude) * toRad
        let dLon = (b.longitude - a.longitude) * toRad
        let h = sin(dLat / 2) * sin(dLat / 2)
            + cos(a.latitude * toRad) * cos(b.latitude * toRad) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * earthRadiusKm * asin(min(1, sqrt(h)))
    }
}

/// Full-text tokens as CloudKit's SEARCHABLE indexes them: words split on anything that is not a letter or digit,
/// case- and diacritic-folded, common English stop words dropped.
public enum TextTokenizer {
    static let stopWords: Set<String> = [
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
        "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
        "will", "with",
    ]

    /// The words of `s`, case- and diacritic-folded, stop words left out: what the full-text index files a
    /// SEARCHABLE value under and what a token search looks for.
    public static func tokens(_ s: String) -> [String] {
        asciiTokens(s) ?? foldedTokens(s)
    }

    /// The terms a token search (CONTAINS_ALL_TOKENS, CONTAINS_ANY_TOKENS, `self CONTAINS`) looks for in `s`: its
    /// ``tokens(_:)``, except that a word written with a `*` right after it is a prefix term, kept folded with its
    /// `*` (`"Swi*"` → `"swi*"`: any token that begins with "swi"), stop word or not. A `*` after no word is a
    /// separator, as any other punctuation. Tokens never hold a `*`, so the two kinds cannot be confused.
    public static func searchTerms(_ s: String) -> [String] {
        guard s.utf8.contains(UInt8(ascii: "*")) else { return tokens(s) }
        var out: [String] = []
        let parts = s.split(separator: "*", omittingEmptySubsequences: false)
        for (i, part) in parts.enumerated() {
            let scalars = part.unicodeScalars
            // The word the `*` follows: the part's last run of letters and digits (none after the last part).
            var start = scalars.endIndex
            if i < parts.count - 1 {
                while start > scalars.startIndex, CharacterSet.alphanumerics.contains(scalars[scalars.index(before: start)]) {
                    start = scalars.index(before: start)
                }
            }
            out += tokens(String(scalars[..<start]))
            if start < scalars.endIndex, let word = foldedTokens(String(scalars[start...]), droppingStopWords: false).last {
                out.append(word + "*")
            }
        }
        return out
    }

    /// The prefix a search term (``searchTerms(_:)``) stands for, without its `*`; nil for a whole token.
    public static func prefix(of term: String) -> Substring? {
        term.utf8.last == UInt8(ascii: "*") ? term.dropLast() : nil
    }

    /// Whether a prefix term's `prefix` (``prefix(of:)``) begins `token`: by UTF-8 bytes, the order the full-text
    /// index's keys are in, so that evaluation and the index's key range for the prefix find the same tokens.
    public static func begins(_ token: String, with prefix: Substring) -> Bool { token.utf8.starts(with: prefix.utf8) }

    /// ``tokens(_:)`` of a string that is all ASCII, without Foundation: folding is lowercasing there and the
    /// alphanumerics are `0-9 A-Z a-z`, so this gives what ``foldedTokens(_:)`` does (tested equal) at a fraction
    /// of the cost — a query evaluates it on every record it reads. nil if `s` has a byte beyond ASCII.
    static func asciiTokens(_ s: String) -> [String]? {
        var out: [String] = []
        var word: [UInt8] = []
        func end() {
            guard !word.isEmpty else { return }
            let w = String(decoding: word, as: UTF8.self)
            if !stopWords.contains(w) { out.append(w) }
            word.removeAll(keepingCapacity: true)
        }
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): word.append(b)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): word.append(b | 0x20)
            case 0x80...: return nil
            default: end()
            }
        }
        end()
        return out
    }

    /// ``tokens(_:)`` by Foundation's folding and Unicode's alphanumerics: any string.
    static func foldedTokens(_ s: String, droppingStopWords: Bool = true) -> [String] {
        let folded = s.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
        var out: [String] = []
        var current = ""
        func end() {
            if !current.isEmpty && !(droppingStopWords && stopWords.contains(current)) { out.append(current) }
            current = ""
        }
        for ch in folded.unicodeScalars {
            if CharacterSet.alphanumerics.contains(ch) {
                current.unicodeScalars.append(ch)
            } else {
                end()
            }
        }
        end()
        return out
    }
}
