/// A JSON parser (RFC 8259) over UTF-8 bytes: strict grammar, validated UTF-8, bounded nesting, and errors that
/// say what was expected at which byte offset.
public struct JSONParser {
    /// Why a document was rejected and where.
    public struct Error: Swift.Error, Sendable, CustomStringConvertible {
        public var message: String
        /// Byte offset in the input.
        public var offset: Int
        public var description: String { "\(message) at byte \(offset)" }
    }

    /// Deepest nesting of arrays and objects accepted (a guard against stack exhaustion).
    public static let maxDepth = 64

    private let bytes: UnsafeBufferPointer<UInt8>
    private var i = 0
    private var depth = 0
    /// The members of the objects being parsed, innermost last: an object's dictionary is built once its members
    /// are known, at its exact size (growing a dictionary member by member rehashes it at every doubling).
    private var pending: [(key: String, value: JSONValue, offset: Int)] = []

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        pending.reserveCapacity(16)
    }

    /// Parses one JSON value that makes up the whole of `input` (surrounding whitespace allowed).
    public static func parse(_ input: [UInt8]) throws(Error) -> JSONValue {
        let result: Result<JSONValue, Error> = input.withUnsafeBufferPointer { buffer in
            var p = JSONParser(buffer)
            do {
                p.skipWhitespace()
                let v = try p.value()
                p.skipWhitespace()
                guard p.i == buffer.count else { throw p.error("unexpected data after the JSON value") }
                return .success(v)
            } catch let e as Error {
                return .failure(e)
            } catch {
                return .failure(Error(message: "\(error)", offset: 0))
            }
        }
        return try result.get()
    }

    private func error(_ message: String) -> Error { Error(message: message, offset: i) }

    private mutating func skipWhitespace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    private mutating func value() throws(Error) -> JSONValue {
        guard i < bytes.count else { throw error("unexpected end of input, expected a value") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw error("unexpected character '\(Self.printable(bytes[i]))', expected a value")
        }
    }

    private mutating func literal(_ word: StaticString) throws(Error) {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { throw error("unexpected end of input in '\(word)'") }
        for k in 0..<n where bytes[i + k] != word.utf8Start[k] { throw error("invalid literal, expected '\(word)'") }
        i += n
    }

    private mutating func enter() throws(Error) {
        depth += 1
        guard depth <= Self.maxDepth else { throw error("nesting deeper than \(Self.maxDepth) levels") }
    }

    private mutating func object() throws(Error) -> JSONValue {
        try enter()
        i += 1
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
            i += 1
            depth -= 1
            return .object([:])
        }
        let first = pending.count
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw error("expected a string key in an object") }
            let offset = i
            let key = try string()
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw error("expected ':' after key \"\(key)\"") }
            i += 1
            skipWhitespace()
            pending.append((key, try value(), offset))
            skipWhitespace()
            guard i < bytes.count else { throw error("unexpected end of input in an object") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
            } else if bytes[i] == UInt8(ascii: "}") {
                i += 1
                depth -= 1
                var members = [String: JSONValue](minimumCapacity: pending.count - first)
                for m in pending[first...] where members.updateValue(m.value, forKey: m.key) != nil {
                    throw Error(message: "duplicate key \"\(m.key)\" in an object", offset: m.offset)
                }
                pending.removeLast(pending.count - first)
                return .object(members)
            } else {
                throw error("expected ',' or '}' in an object")
            }
        }
    }

    private mutating func array() throws(Error) -> JSONValue {
        try enter()
        i += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
            i += 1
            depth -= 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try value())
            skipWhitespace()
            guard i < bytes.count else { throw error("unexpected end of input in an array") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
            } else if bytes[i] == UInt8(ascii: "]") {
                i += 1
                depth -= 1
                return .array(items)
            } else {
                throw error("expected ',' or ']' in an array")
            }
        }
    }

    private mutating func number() throws(Error) -> JSONNumber {
        let start = i
        var integer = true
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, Self.isDigit(bytes[i]) else { throw error("invalid number: expected a digit") }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
            if i < bytes.count, Self.isDigit(bytes[i]) { throw error("invalid number: leading zero") }
        } else {
            while i < bytes.count, Self.isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            integer = false
            i += 1
            guard i < bytes.count, Self.isDigit(bytes[i]) else { throw error("invalid number: expected a digit after '.'") }
            while i < bytes.count, Self.isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            integer = false
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count, Self.isDigit(bytes[i]) else { throw error("invalid number: expected an exponent") }
            while i < bytes.count, Self.isDigit(bytes[i]) { i += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
        return JSONNumber(text: text, isInteger: integer)
    }

    private mutating func string() throws(Error) -> String {
        i += 1
        let start = i
        // Fast path: no escapes. ASCII (every byte below 0x80) needs no UTF-8 validation.
        var bits: UInt8 = 0
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<i])
                let s = bits < 0x80 ? String(decoding: slice, as: UTF8.self) : try utf8(start..<i)
                i += 1
                return s
            }
            bits |= c
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw error("control character in a string (escape it)") }
            i += 1
        }
        var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<i]))
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                guard let s = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8 in a string") }
                return s
            }
            if c < 0x20 { throw error("control character in a string (escape it)") }
            if c != UInt8(ascii: "\\") {
                out.append(c)
                i += 1
                continue
            }
            i += 1
            guard i < bytes.count else { break }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw error("unpaired surrogate in \\u escape")
                    }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("invalid low surrogate in \\u escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw error("unpaired surrogate in \\u escape")
                }
                out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
            default: throw error("invalid escape '\\\(Self.printable(e))' in a string")
            }
        }
        throw error("unterminated string")
    }

    private mutating func hex4() throws(Error) -> UInt32 {
        guard i + 4 <= bytes.count else { throw error("unexpected end of input in \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = c - UInt8(ascii: "A") + 10
            default: throw error("invalid hex digit in \\u escape")
            }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    private func utf8(_ range: Range<Int>) throws(Error) -> String {
        let slice = UnsafeBufferPointer(rebasing: bytes[range])
        guard let s = String(validating: slice, as: UTF8.self) else { throw error("invalid UTF-8 in a string") }
        return s
    }

    private static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    private static func printable(_ c: UInt8) -> String {
        c >= 0x20 && c < 0x7F ? String(UnicodeScalar(c)) : "\\u{\(String(c, radix: 16))}"
    }
}

// MARK: - Streaming reads

/// A decoder that knows the shape it expects can walk a document member by member instead of building the
/// ``JSONValue`` tree (a dictionary per object: hashing every key, allocating every level) — the client's hot
/// responses are read that way. The grammar, UTF-8 and depth checks are those of ``parse(_:)``; duplicate keys are
/// the reader's to notice.
extension JSONParser {
    /// Where a reader is: ``reset(to:)`` goes back there (to read the same value another way).
    public struct Mark: Sendable {
        fileprivate let offset: Int
        fileprivate let depth: Int
        fileprivate let pending: Int
    }

    /// Runs `body` over the document `input`, which must make up the whole of it (surrounding whitespace allowed).
    public static func read<T>(_ input: [UInt8], _ body: (inout JSONParser) throws -> T) throws -> T {
        try input.withUnsafeBufferPointer { buffer in
            var p = JSONParser(buffer)
            p.skipWhitespace()
            let result = try body(&p)
            p.skipWhitespace()
            guard p.i == buffer.count else { throw p.error("unexpected data after the JSON value") }
            return result
        }
    }

    public var mark: Mark { Mark(offset: i, depth: depth, pending: pending.count) }

    public mutating func reset(to mark: Mark) {
        i = mark.offset
        depth = mark.depth
        pending.removeLast(pending.count - mark.pending)
    }

    /// The next value, whole.
    public mutating func readValue() throws(Error) -> JSONValue {
        skipWhitespace()
        return try value()
    }

    /// The next value, which must be a string.
    public mutating func readString() throws(Error) -> String {
        skipWhitespace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw error("expected a string") }
        return try string()
    }

    /// Whether the next value is `null` (then read).
    public mutating func readNull() throws(Error) -> Bool {
        skipWhitespace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    /// Reads an object: `member` is called with each key and must read its value (with any of the `read` calls).
    public mutating func readObject(_ member: (inout JSONParser, String) throws -> Void) throws {
        try readContainer(UInt8(ascii: "{"), UInt8(ascii: "}"), "an object") { p in
            p.skipWhitespace()
            guard p.i < p.bytes.count, p.bytes[p.i] == UInt8(ascii: "\"") else { throw p.error("expected a string key in an object") }
            let key = try p.string()
            p.skipWhitespace()
            guard p.i < p.bytes.count, p.bytes[p.i] == UInt8(ascii: ":") else { throw p.error("expected ':' after key \"\(key)\"") }
            p.i += 1
            try member(&p, key)
        }
    }

    /// Reads an array: `item` is called with the index of each item and must read it.
    public mutating func readArray(_ item: (inout JSONParser, Int) throws -> Void) throws {
        var n = 0
        try readContainer(UInt8(ascii: "["), UInt8(ascii: "]"), "an array") { p in
            try item(&p, n)
            n += 1
        }
    }

    /// An object or array: `open`, then `each` for every entry until `close`, entries separated by commas.
    private mutating func readContainer(_ open: UInt8, _ close: UInt8, _ what: String, _ each: (inout JSONParser) throws -> Void)
        throws
    {
        skipWhitespace()
        guard i < bytes.count, bytes[i] == open else { throw error("expected \(what)") }
        try enter()
        i += 1
        skipWhitespace()
        if i < bytes.count, bytes[i] == close {
            i += 1
            depth -= 1
            return
        }
        while true {
            try each(&self)
            skipWhitespace()
            guard i < bytes.count else { throw error("unexpected end of input in \(what)") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
            } else if bytes[i] == close {
                i += 1
                depth -= 1
                return
            } else {
                throw error("expected ',' or '\(Character(Unicode.Scalar(close)))' in \(what)")
            }
        }
    }
}
