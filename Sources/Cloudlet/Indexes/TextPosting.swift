import CloudletCore
import CloudletStorage

/// What a full-text (SEARCHABLE) index keeps with each of its keys, `token · name` → `varint frequency · varint
/// length`: how often the token occurs in the record's value of the field, and how many tokens that value has — the
/// two per-document terms of BM25, so that a query ranks its matches from the postings it reads, without reading a
/// record (docs/index-layer.md, "Full-text ranking"). Keys written before flushed-state version 8 carry no value
/// (``decode(_:)`` gives nil); opening such a store rewrites them (``IndexState/migrateTextPostings(keys:sequence:)``).
struct TextPosting: Sendable, Hashable {
    var frequency: Int
    var length: Int

    var encoded: [UInt8] {
        var w = ByteWriter(capacity: 4)
        w.varint(frequency)
        w.varint(length)
        return w.bytes
    }

    /// The posting a key's value holds; nil for an empty value (a key written before postings had values).
    static func decode(_ bytes: [UInt8]) throws -> TextPosting? { try decode(bytes[...]) }

    /// ``decode(_:)`` of the bytes where they lie (a run's block).
    static func decode(_ bytes: ArraySlice<UInt8>) throws -> TextPosting? {
        guard !bytes.isEmpty else { return nil }
        var at = bytes.startIndex
        func varint() -> Int? { ByteReader.varint(bytes, at: &at).flatMap { $0 <= UInt64(Int.max) ? Int($0) : nil } }
        guard let frequency = varint(), let length = varint(), at == bytes.endIndex, frequency >= 1, frequency <= length else {
            throw CloudletError.corruption("full-text posting: malformed value \(LSMKey.printable(Array(bytes)))")
        }
        return TextPosting(frequency: frequency, length: length)
    }
}

/// A value's tokens as a full-text index files it: each token with its posting, and the value's length in tokens.
struct TextDocument: Sendable, Equatable {
    /// Token → how often it occurs.
    var frequencies: [String: Int]
    /// The value's tokens (``TextTokenizer/tokens(_:)``, stop words left out), counted with repeats.
    var length: Int

    static let empty = TextDocument(frequencies: [:], length: 0)

    /// The tokens of a STRING or of a LIST<STRING>'s members together; empty for other values and for nil.
    init(_ value: FieldValue?) {
        var f: [String: Int] = [:]
        var n = 0
        func add(_ s: String) {
            for t in TextTokenizer.tokens(s) {
                f[t, default: 0] += 1
                n += 1
            }
        }
        switch value {
        case .string(let s)?: add(s)
        case .list(.string, let items)?: for case .string(let s) in items { add(s) }
        default: break
        }
        self.init(frequencies: f, length: n)
    }

    init(frequencies: [String: Int], length: Int) {
        self.frequencies = frequencies
        self.length = length
    }

    /// The posting of a token, or of a prefix search term (``TextTokenizer/searchTerms(_:)``, `"swi*"`): the
    /// occurrences of every token it begins, summed; nil if none occurs.
    func posting(_ term: String) -> TextPosting? {
        guard let prefix = TextTokenizer.prefix(of: term) else {
            return frequencies[term].map { TextPosting(frequency: $0, length: length) }
        }
        var n = 0
        for (t, f) in frequencies where TextTokenizer.begins(t, with: prefix) { n += f }
        return n > 0 ? TextPosting(frequency: n, length: length) : nil
    }

    /// The token whose key says whether the record is in the index: a record is filed under all its tokens or none
    /// (``IndexState`` puts them together), so looking up one tells.
    var probe: String? { frequencies.keys.min { LSMKey.less(Array($0.utf8), Array($1.utf8)) } }
}

/// A text index's totals in one zone: the records it files (those with at least one token) and their tokens in
/// all — BM25's average document length is `tokens / documents`.
struct TextTotals: Sendable, Hashable {
    var documents = 0
    var tokens = 0

    mutating func add(_ d: TextDocument, _ sign: Int) {
        guard d.length > 0 else { return }
        documents += sign
        tokens += sign * d.length
    }
}
