import Foundation

/// A value that can stand for `%@` in a predicate format string.
public protocol PredicateArgument: Sendable {
    var predicateValue: FieldValue { get }
}

extension FieldValue: PredicateArgument { public var predicateValue: FieldValue { self } }
extension String: PredicateArgument { public var predicateValue: FieldValue { .string(self) } }
extension Int: PredicateArgument { public var predicateValue: FieldValue { .int64(Int64(self)) } }
extension Int64: PredicateArgument { public var predicateValue: FieldValue { .int64(self) } }
extension Double: PredicateArgument { public var predicateValue: FieldValue { .double(self) } }
extension Date: PredicateArgument { public var predicateValue: FieldValue { .date(self) } }
extension Location: PredicateArgument { public var predicateValue: FieldValue { .location(self) } }
extension Reference: PredicateArgument { public var predicateValue: FieldValue { .reference(self) } }
extension RecordID: PredicateArgument { public var predicateValue: FieldValue { .reference(Reference(recordName: recordName)) } }
extension Array: PredicateArgument where Element: PredicateArgument {
    public var predicateValue: FieldValue {
        let items = map(\.predicateValue)
        return .list(items.first?.type.scalar ?? .string, items)
    }
}

/// A predicate format string that cannot be parsed or is not allowed; says where and why.
public struct PredicateSyntaxError: Error, Sendable, CustomStringConvertible {
    /// Character offset in the format string.
    public var offset: Int
    public var message: String
    public var format: String

    public var description: String { "predicate \"\(format)\": \(message) at offset \(offset)" }
}

extension Predicate {
    /// Parses an NSPredicate-style format string — CKQuery's subset: `=`, `==`, `!=`, `<>`, `<`, `<=`, `>`, `>=`,
    /// `BETWEEN`, `BEGINSWITH`, `IN`, `CONTAINS` (list membership), `ANY`/`SOME`, `AND`/`&&`, `NOT`/`!` (where
    /// CloudKit allows it), `TRUEPREDICATE`, `FALSEPREDICATE`, `self CONTAINS 'text'` (full text, any token),
    /// `ALL tokenize(%@, 'Cdl') IN allTokens` (full text, every token), `distanceToLocation:fromLocation:(key, %@)
    /// < kilometres` (CloudKit reads the radius in kilometres), `now()` and `CAST(seconds, 'NSDate')` (seconds
    /// since 2001, as NSPredicate; an ISO 8601 string works too), `%@` values and `%K` keys — plus `OR`/`||` and
    /// parentheses, which CloudKit lacks.
    ///
    /// ```swift
    /// try Predicate(format: "kind == %@ AND price < %@", "book", 20)
    /// try Predicate(format: "self CONTAINS 'coffee' OR ANY tags IN %@", ["cafe", "espresso"])
    /// ```
    /// - Throws: ``CloudletError`` `invalidArguments` whose message names the offset and what was expected; its
    ///   `cause` is the ``PredicateSyntaxError``.
    public init(format: String, _ arguments: any PredicateArgument...) throws {
        try self.init(format: format, arguments: arguments)
    }

    public init(format: String, arguments: [any PredicateArgument]) throws {
        var p = PredicateParser(format: format, arguments: arguments)
        do { self = try p.parse() } catch let e as PredicateSyntaxError {
            throw CloudletError(.invalidArguments, e.description, cause: e)
        }
    }
}

struct PredicateParser {
    enum Token: Equatable {
        case word(String)  // identifiers and keywords (keywords compared uppercased)
        case string(String)
        case number(String)
        case symbol(String)  // = == != <> < <= =< > >= => ( ) { } , && || !
        case argument  // %@
        case keyArgument  // %K
        case end
    }

    let format: String
    let arguments: [any PredicateArgument]
    private var tokens: [(Token, Int)] = []
    private var pos = 0
    private var argIndex = 0
    /// Whether the primary just parsed was a BETWEEN (which parses to an AND), for NOT's error message.
    private var lastWasBetween = false
    /// Parentheses, NOTs and lists open around the current token; at most ``maxDepth``, so that a hostile format
    /// cannot overflow the stack of this recursive parser (and what it parses stays within ``PredicateCodec``'s
    /// nesting limit).
    private var depth = 0
    static let maxDepth = 32

    init(format: String, arguments: [any PredicateArgument]) {
        self.format = format
        self.arguments = arguments
    }

    func error(_ message: String, at offset: Int? = nil) -> PredicateSyntaxError {
        PredicateSyntaxError(offset: offset ?? tokens[min(pos, tokens.count - 1)].1, message: message, format: format)
    }

    mutating func parse() throws -> Predicate {
        tokens = try Self.lex(format)
        let p = try parseOr()
        guard case .end = peek else { throw error("expected AND, OR or the end, found \(describe(peek))") }
        guard argIndex == arguments.count else {
            throw error("\(arguments.count) arguments given but the format uses \(argIndex)", at: format.count)
        }
        return p
    }

    /// Enters one more level of nesting at `at`; the caller leaves it (`depth -= 1`) when done.
    private mutating func descend(at: Int) throws {
        depth += 1
        guard depth <= Self.maxDepth else {
            throw error("parentheses, NOTs and lists nest deeper than \(Self.maxDepth) levels", at: at)
        }
    }

    private var peek: Token { tokens[pos].0 }
    private var offset: Int { tokens[pos].1 }

    private mutating func next() -> Token {
        defer { if pos < tokens.count - 1 { pos += 1 } }
        return tokens[pos].0
    }

    private func isKeyword(_ t: Token, _ k: String) -> Bool {
        if case .word(let w) = t { return w.uppercased() == k }
        return false
    }

    private func describe(_ t: Token) -> String {
        switch t {
        case .word(let w): "'\(w)'"
        case .string(let s): "string '\(s)'"
        case .number(let n): "number \(n)"
        case .symbol(let s): "'\(s)'"
        case .argument: "%@"
        case .keyArgument: "%K"
        case .end: "the end"
        }
    }

    private mutating func parseOr() throws -> Predicate {
        var parts = [try parseAnd()]
        while isKeyword(peek, "OR") || peek == .symbol("||") {
            _ = next()
            parts.append(try parseAnd())
        }
        return parts.count == 1 ? parts[0] : .or(parts)
    }

    private mutating func parseAnd() throws -> Predicate {
        var parts = [try parseNot()]
        while isKeyword(peek, "AND") || peek == .symbol("&&") {
            _ = next()
            parts.append(try parseNot())
        }
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    private mutating func parseNot() throws -> Predicate {
        guard isKeyword(peek, "NOT") || peek == .symbol("!") else { return try parsePrimary() }
        let at = offset
        _ = next()
        try descend(at: at)
        defer { depth -= 1 }
        let inner = try parseNot()
        switch inner {
        case .and where lastWasBetween:
            throw error("NOT cannot negate BETWEEN (CloudKit does not allow it); use < OR >", at: at)
        case .and:
            throw error("NOT cannot negate an AND (CloudKit does not allow it); negate each comparison", at: at)
        case .comparison(let c):
            if let n = c.comparator.negated {
                var flipped = c
                flipped.comparator = n
                return .comparison(flipped)
            }
            throw error("NOT cannot negate \(c.comparator == .near ? "a distance comparison" : "a full-text search")", at: at)
        case .all: return .none
        case .none: return .all
        default: return .not(inner)
        }
    }

    private mutating func parsePrimary() throws -> Predicate {
        lastWasBetween = false
        if peek == .symbol("(") {
            try descend(at: offset)
            defer { depth -= 1 }
            _ = next()
            let p = try parseOr()
            try expect(.symbol(")"), "')' to close the parenthesis")
            lastWasBetween = false
            return p
        }
        if isKeyword(peek, "TRUEPREDICATE") {
            _ = next()
            return .all
        }
        if isKeyword(peek, "FALSEPREDICATE") {
            _ = next()
            return .none
        }
        if (isKeyword(peek, "ANY") || isKeyword(peek, "SOME") || isKeyword(peek, "ALL")), case .word(let w) = tokens[pos + 1].0,
            w.lowercased().hasPrefix("tokenize")
        {
            return try parseTokenize()
        }
        if isKeyword(peek, "ALL") {
            throw error("ALL is not supported by CloudKit queries (ANY is; ALL only in ALL tokenize(…) IN allTokens)")
        }
        if isKeyword(peek, "ANY") || isKeyword(peek, "SOME") {
            _ = next()
            let key = try parseKey()
            let opAt = offset
            let op = try parseOperator()
            let value = try parseValue()
            switch op {
            case "=", "==": return .comparison(Comparison(key, .listContains, value))
            case "IN": return .comparison(Comparison(key, .listContainsAny, try requireList(value, opAt)))
            case "BEGINSWITH": return .comparison(Comparison(key, .listMemberBeginsWith, value))
            default: throw error("ANY supports =, IN and BEGINSWITH, not \(op)", at: opAt)
            }
        }
        if case .word(let w) = peek, w.hasPrefix("distanceToLocation:fromLocation:") { return try parseDistance() }
        if case .word(let w) = peek, w.lowercased() == "self" {
            _ = next()
            guard isKeyword(peek, "CONTAINS") else { throw error("expected CONTAINS after self, found \(describe(peek))") }
            _ = next()
            let at = offset
            let value = try parseValue()
            guard value.stringValue != nil else { throw error("self CONTAINS needs a string", at: at) }
            return .comparison(Comparison(fullTextField, .containsAnyTokens, value))
        }
        // value IN key (list membership, written the other way round)
        switch peek {
        case .string, .number, .argument:
            guard isKeyword(tokens[pos + 1].0, "IN") else { break }
            let value = try parseValue()
            _ = next()
            return .comparison(Comparison(try parseKey(), .listContains, value))
        default: break
        }
        let key = try parseKey()
        let opAt = offset
        let op = try parseOperator()
        let value = try parseValue()
        switch op {
        case "=", "==": return .comparison(Comparison(key, .equals, value))
        case "!=", "<>": return .comparison(Comparison(key, .notEquals, value))
        case "<": return .comparison(Comparison(key, .lessThan, value))
        case "<=", "=<": return .comparison(Comparison(key, .lessThanOrEquals, value))
        case ">": return .comparison(Comparison(key, .greaterThan, value))
        case ">=", "=>": return .comparison(Comparison(key, .greaterThanOrEquals, value))
        case "BEGINSWITH":
            guard value.stringValue != nil else { throw error("BEGINSWITH needs a string", at: opAt) }
            return .comparison(Comparison(key, .beginsWith, value))
        case "IN": return .comparison(Comparison(key, .in, try requireList(value, opAt)))
        case "CONTAINS": return .comparison(Comparison(key, .listContains, value))
        case "BETWEEN":
            guard case .list(_, let items) = value, items.count == 2 else {
                throw error("BETWEEN needs a list of two values, like {1, 5}", at: opAt)
            }
            lastWasBetween = true
            return .and([
                .comparison(Comparison(key, .greaterThanOrEquals, items[0])),
                .comparison(Comparison(key, .lessThanOrEquals, items[1])),
            ])
        default: throw error("unknown operator \(op)", at: opAt)
        }
    }

    /// Consumes `token` or throws "expected <what>" at the token found instead.
    private mutating func expect(_ token: Token, _ what: String) throws {
        guard peek == token else { throw error("expected \(what), found \(describe(peek))") }
        _ = next()
    }

    /// A list literal: values of one type; integers and doubles together become doubles.
    private func list(_ items: [FieldValue], at: Int) throws -> FieldValue {
        let numeric = items.allSatisfy { $0.type == FieldType(.int64) || $0.type == FieldType(.double) }
        if numeric && items.contains(where: { $0.type == FieldType(.double) }) {
            return .list(.double, items.map { v in v.int64Value.map { .double(Double($0)) } ?? v })
        }
        let type = items.first?.type.scalar ?? .string
        guard items.allSatisfy({ $0.type == FieldType(type) }) else {
            throw error("a list must hold values of one type", at: at)
        }
        return .list(type, items)
    }

    /// `ALL tokenize(%@, 'Cdl') IN allTokens` (every token) or `ANY tokenize(…) IN allTokens` (any token): CKQuery's
    /// full-text form over every searchable field.
    private mutating func parseTokenize() throws -> Predicate {
        let all = isKeyword(peek, "ALL")
        _ = next()
        guard case .word(let w) = peek, w.lowercased() == "tokenize" || w.lowercased() == "tokenize:using:" else {
            throw error("expected tokenize(…)")
        }
        _ = next()
        try expect(.symbol("("), "'(' after tokenize")
        let textAt = offset
        let text = try parseValue()
        guard text.stringValue != nil else { throw error("tokenize needs a string", at: textAt) }
        try expect(.symbol(","), "',' and the options string ('Cdl')")
        _ = try parseValue()
        try expect(.symbol(")"), "')' after tokenize's options")
        guard isKeyword(peek, "IN") else { throw error("expected IN allTokens after tokenize(…)") }
        _ = next()
        guard case .word(let target) = peek, target.lowercased() == "alltokens" || target.lowercased() == "self" else {
            throw error("expected allTokens after IN")
        }
        _ = next()
        return .comparison(Comparison(fullTextField, all ? .containsAllTokens : .containsAnyTokens, text))
    }

    /// `CAST(seconds since 2001, 'NSDate')` as NSPredicate reads it, or `CAST('2024-05-01T12:00:00Z', 'NSDate')`.
    private mutating func parseCast(at: Int) throws -> FieldValue {
        try expect(.symbol("("), "'(' after CAST")
        let valueAt = offset
        let value = try parseValue()
        try expect(.symbol(","), "',' and the type ('NSDate')")
        let typeAt = offset
        guard case .string(let type) = next(), type == "NSDate" else {
            throw error("CAST supports only 'NSDate'", at: typeAt)
        }
        try expect(.symbol(")"), "')' to close CAST")
        func seconds(_ s: Double) throws -> FieldValue {
            guard let date = FieldValue.checkedDate(Date(timeIntervalSinceReferenceDate: s)) else {
                throw error("CAST(\(s), 'NSDate') is outside the range of a timestamp", at: valueAt)
            }
            return date
        }
        switch value {
        case .int64(let s): return try seconds(Double(s))
        case .double(let s): return try seconds(s)
        case .string(let s):
            guard let d = ISO8601DateFormatter().date(from: s) else {
                throw error("'\(s)' is not an ISO 8601 date like 2024-05-01T12:00:00Z", at: valueAt)
            }
            return .date(d)
        default: throw error("CAST to NSDate needs a number of seconds since 2001 or an ISO 8601 string", at: valueAt)
        }
    }

    private func requireList(_ v: FieldValue, _ at: Int) throws -> FieldValue {
        guard case .list = v else { throw error("IN needs a list, like {'a', 'b'} or an array argument", at: at) }
        return v
    }

    private mutating func parseDistance() throws -> Predicate {
        let at = offset
        guard case .word(let w) = next(), w == "distanceToLocation:fromLocation:" else {
            throw error("expected distanceToLocation:fromLocation:(key, location)", at: at)
        }
        try expect(.symbol("("), "'(' after distanceToLocation:fromLocation:")
        let key = try parseKey()
        try expect(.symbol(","), "',' between the field and the location")
        let centerAt = offset
        let center = try parseValue()
        guard case .location = center else {
            throw error("distanceToLocation:fromLocation: needs a location argument (%@ with a Location)", at: centerAt)
        }
        try expect(.symbol(")"), "')' after the location")
        let opAt = offset
        let op = try parseOperator()
        guard op == "<" || op == "<=" else {
            throw error("a distance can only be compared with < or <= (CloudKit finds records inside a radius)", at: opAt)
        }
        let radiusAt = offset
        let radius = try parseValue()
        let kilometres: Double
        switch radius {
        case .int64(let v): kilometres = Double(v)
        case .double(let v): kilometres = v
        default: throw error("the distance must be a number of kilometres", at: radiusAt)
        }
        guard kilometres.isFinite, kilometres >= 0 else { throw error("the distance must be a finite number ≥ 0", at: radiusAt) }
        return .comparison(Comparison(key, .near, center, distance: kilometres))
    }

    private mutating func parseKey() throws -> String {
        let at = offset
        switch next() {
        case .word(let w):
            guard !["AND", "OR", "NOT", "IN", "ANY", "SOME", "BETWEEN", "BEGINSWITH", "CONTAINS"].contains(w.uppercased()) else {
                throw error("expected a field name, found keyword \(w)", at: at)
            }
            return w
        case .keyArgument:
            guard argIndex < arguments.count else { throw error("%K has no argument", at: at) }
            defer { argIndex += 1 }
            guard let s = arguments[argIndex].predicateValue.stringValue else { throw error("%K needs a string argument", at: at) }
            return s
        case let t: throw error("expected a field name, found \(describe(t))", at: at)
        }
    }

    private mutating func parseOperator() throws -> String {
        let at = offset
        switch next() {
        case .symbol(let s) where ["=", "==", "!=", "<>", "<", "<=", "=<", ">", ">=", "=>"].contains(s): return s
        case .word(let w) where ["BETWEEN", "BEGINSWITH", "IN", "CONTAINS"].contains(w.uppercased()): return w.uppercased()
        case .word(let w) where ["ENDSWITH", "LIKE", "MATCHES"].contains(w.uppercased()):
            throw error("\(w.uppercased()) is not supported by CloudKit queries (BEGINSWITH is)", at: at)
        case let t: throw error("expected an operator (=, !=, <, <=, >, >=, BETWEEN, BEGINSWITH, IN, CONTAINS), found \(describe(t))", at: at)
        }
    }

    private mutating func parseValue() throws -> FieldValue {
        let at = offset
        switch next() {
        case .string(let s): return .string(s)
        case .number(let n):
            if let i = Int64(n) { return .int64(i) }
            if let d = Double(n) { return .double(d) }
            throw error("bad number \(n)", at: at)
        case .argument:
            guard argIndex < arguments.count else { throw error("%@ has no argument", at: at) }
            defer { argIndex += 1 }
            return arguments[argIndex].predicateValue
        case .symbol("{"):
            try descend(at: at)
            defer { depth -= 1 }
            var items: [FieldValue] = []
            if peek != .symbol("}") {
                items.append(try parseValue())
                while peek == .symbol(",") {
                    _ = next()
                    items.append(try parseValue())
                }
            }
            try expect(.symbol("}"), "',' or '}' to close the list")
            return try list(items, at: at)
        case .word(let w) where w.uppercased() == "TRUE" || w.uppercased() == "YES": return .int64(1)
        case .word(let w) where w.uppercased() == "FALSE" || w.uppercased() == "NO": return .int64(0)
        case .word(let w) where w.lowercased() == "now" || w.lowercased() == "now:":
            try expect(.symbol("("), "'(' after now")
            try expect(.symbol(")"), "')' after now(")
            return .date(Date())
        case .word(let w) where w.uppercased() == "CAST":
            return try parseCast(at: at)
        case let t: throw error("expected a value (a quoted string, a number, %@ or {…}), found \(describe(t))", at: at)
        }
    }

    private static func isDigit(_ c: Character) -> Bool { c.isASCII && c.isNumber }

    static func lex(_ s: String) throws -> [(Token, Int)] {
        let chars = Array(s)
        var out: [(Token, Int)] = []
        var i = 0
        func fail(_ m: String, _ at: Int) -> PredicateSyntaxError { PredicateSyntaxError(offset: at, message: m, format: s) }
        while i < chars.count {
            let c = chars[i]
            let start = i
            if c.isWhitespace {
                i += 1
            } else if c == "'" || c == "\"" {
                var v = ""
                i += 1
                while i < chars.count && chars[i] != c {
                    if chars[i] == "\\" && i + 1 < chars.count { i += 1 }
                    v.append(chars[i])
                    i += 1
                }
                guard i < chars.count else { throw fail("unterminated string", start) }
                i += 1
                out.append((.string(v), start))
            } else if isDigit(c) || (c == "-" && i + 1 < chars.count && isDigit(chars[i + 1])) {
                var v = String(c)
                i += 1
                while i < chars.count {
                    let d = chars[i]
                    let exponentSign = (d == "-" || d == "+") && (v.last == "e" || v.last == "E")
                    guard isDigit(d) || d == "." || d == "e" || d == "E" || exponentSign else { break }
                    v.append(d)
                    i += 1
                }
                out.append((.number(v), start))
            } else if c == "%" {
                guard i + 1 < chars.count, chars[i + 1] == "@" || chars[i + 1] == "K" else {
                    throw fail("expected %@ or %K", start)
                }
                out.append((chars[i + 1] == "@" ? .argument : .keyArgument, start))
                i += 2
            } else if c.isLetter || c == "_" {
                var v = ""
                while i < chars.count && (chars[i].isLetter || chars[i].isNumber || chars[i] == "_" || chars[i] == ":" || chars[i] == ".") {
                    v.append(chars[i])
                    i += 1
                }
                out.append((.word(v), start))
            } else {
                let two = i + 1 < chars.count ? String([c, chars[i + 1]]) : ""
                if ["==", "!=", "<>", "<=", "=<", ">=", "=>", "&&", "||"].contains(two) {
                    out.append((.symbol(two), start))
                    i += 2
                } else if "=<>(){},!".contains(c) {
                    out.append((.symbol(String(c)), start))
                    i += 1
                } else {
                    throw fail("unexpected character '\(c)'", start)
                }
            }
        }
        out.append((.end, chars.count))
        return out
    }
}
