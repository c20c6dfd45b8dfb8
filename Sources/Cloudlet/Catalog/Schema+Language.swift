import CloudletConcurrency
import CloudletCore

/// The CloudKit Schema Language: a container's record types, field types and index flags as text.
///
/// ```
/// DEFINE SCHEMA
///
///     RECORD TYPE Lists (
///         "___createTime" TIMESTAMP SORTABLE,
///         "___recordID" REFERENCE QUERYABLE,
///         name STRING QUERYABLE SORTABLE SEARCHABLE,
///         tags LIST<STRING>,
///         INDEX byName (name, "___createTime" DESC)
///     );
/// ```
///
/// The grammar is Apple's: `DEFINE SCHEMA`, then `CREATE ROLE name;` and `RECORD TYPE name (field TYPE [QUERYABLE]
/// [SORTABLE] [SEARCHABLE], …, GRANT READ, CREATE, WRITE TO role);`, types ASSET, BYTES, DOUBLE, INT64, LOCATION,
/// REFERENCE, STRING, TIMESTAMP, `LIST<type>` and `NUMBER PREFERRED AS INT64|DOUBLE`; comments `//`, `--` and
/// `/* */`; double quotes around identifiers that are keywords or system fields (`"___recordID"`). Roles and grants
/// are the public database's security roles (``SecurityPolicy``); `ENCRYPTED` fields are refused.
///
/// Cloudlet's extension: `INDEX name (field [ASC|DESC], …)` among a record type's fields declares a composite index
/// (``CompositeIndex``) on 2 to 8 of the type's INT64, DOUBLE, TIMESTAMP, STRING, REFERENCE or BYTES fields
/// (system fields by their quoted names).
public enum SchemaLanguage {
    /// One field of a record type in a schema text.
    public struct Field: Sendable, Hashable {
        /// The field name; system fields by their ``SystemField`` names (`recordName` for `___recordID`, …).
        public var name: String
        public var type: FieldType
        public var indexes: IndexFlags
        /// Whether this is a system field (`"___createTime"`, …).
        public var isSystem: Bool
        public var line: Int
        public var column: Int
    }

    /// One record type of a schema text.
    public struct RecordType: Sendable, Hashable {
        public var name: String
        public var fields: [Field]
        /// Composite indexes (`INDEX name (…)`), in the text's order.
        public var indexes: [CompositeIndex] = []
        /// `GRANT … TO role` clauses, by role; nil when the type has none (its grants are left as they are).
        public var grants: [String: RecordPermissions]?
        public var line: Int
        public var column: Int
    }

    /// A parsed schema text.
    public struct Document: Sendable, Hashable {
        public var recordTypes: [RecordType]
        /// Custom roles declared (`CREATE ROLE`), in the text's order.
        public var roles: [String] = []
        /// What was read but has no effect (options on `___etag`), with where.
        public var ignored: [String]
    }

    /// A schema text that cannot be read: where and why.
    public struct SyntaxError: Error, Sendable, CustomStringConvertible {
        public var line: Int
        public var column: Int
        public var message: String
        public var description: String { "line \(line), column \(column): \(message)" }
    }

    /// The system fields, by their schema-language names, with their types.
    static let systemFields: [(name: String, field: String?, type: FieldType)] = [
        ("___createTime", SystemField.createdTimestamp.rawValue, FieldType(.timestamp)),
        ("___createdBy", SystemField.createdUserRecordName.rawValue, FieldType(.reference)),
        ("___etag", nil, FieldType(.string)),
        ("___modTime", SystemField.modifiedTimestamp.rawValue, FieldType(.timestamp)),
        ("___modifiedBy", SystemField.modifiedUserRecordName.rawValue, FieldType(.reference)),
        ("___recordID", SystemField.recordName.rawValue, FieldType(.reference)),
    ]

    static let keywords: Set<String> = [
        "define", "schema", "create", "role", "record", "type", "grant", "read", "write", "to", "queryable", "sortable",
        "searchable", "list", "asset", "bytes", "double", "encrypted", "int64", "location", "number", "preferred", "as",
        "reference", "string", "timestamp",
    ]

    // MARK: - Writing

    /// The text of `types`: the custom roles of `security`, then every record type sorted by name, its system
    /// fields (with their index options), its fields sorted by name and its grants (unless it has the defaults).
    public static func format(_ types: [RecordTypeSchema], security: SecurityPolicy = SecurityPolicy()) -> String {
        var out = "DEFINE SCHEMA\n"
        if !security.roles.isEmpty {
            out += "\n" + security.roles.sorted().map { "    CREATE ROLE \(identifier($0));\n" }.joined()
        }
        for t in types.sorted(by: { $0.name < $1.name }) {
            var lines: [String] = []
            for s in systemFields {
                let flags = s.field.flatMap { t.indexes[$0] } ?? []
                lines.append("\"\(s.name)\" \(typeName(s.type))" + (flags.isEmpty ? "" : " \(flags)"))
            }
            for name in t.fields.keys.sorted() {
                let flags = t.indexes[name] ?? []
                lines.append("\(identifier(name)) \(typeName(t.fields[name]!))" + (flags.isEmpty ? "" : " \(flags)"))
            }
            for name in t.composites.keys.sorted() { lines.append("INDEX \(t.composites[name]!)") }
            // A type with CloudKit's default grants is written without GRANT clauses (reading it back keeps them).
            let grants = security.grants[t.name] ?? [:]
            for role in grants.keys.sorted() where !grants[role]!.isEmpty {
                lines.append("GRANT \(grants[role]!) TO \(identifier(role))")
            }
            out += "\n    RECORD TYPE \(identifier(t.name)) (\n"
            out += lines.map { "        " + $0 }.joined(separator: ",\n")
            out += "\n    );\n"
        }
        return out
    }

    static func identifier(_ name: String) -> String {
        keywords.contains(name.lowercased()) || name.hasPrefix("_") ? "\"\(name)\"" : name
    }

    static func typeName(_ t: FieldType) -> String {
        let scalar = t.scalar == .asset ? "ASSET" : t.scalar.cloudKitName
        return t.isList ? "LIST<\(scalar)>" : scalar
    }

    // MARK: - Reading

    /// Reads a schema text. - Throws: ``CloudletError`` `invalidArguments` whose message starts with the line and
    /// column of the problem; its `cause` is the ``SyntaxError``.
    public static func parse(_ text: String) throws -> Document {
        do {
            var p = Parser(tokens: try lex(text))
            return try p.document()
        } catch let e as SyntaxError {
            throw CloudletError(.invalidArguments, e.description, cause: e)
        }
    }

    enum Token: Equatable {
        case word(String)  // identifiers and keywords
        case quoted(String)  // "identifier"
        case symbol(Character)  // ( ) , ; < >
        case end
    }

    struct Located {
        var token: Token
        var line: Int
        var column: Int
    }

    static func lex(_ text: String) throws -> [Located] {
        let chars = Array(text)
        var out: [Located] = []
        var i = 0
        var line = 1
        var column = 1
        func advance() {
            if chars[i] == "\n" {
                line += 1
                column = 1
            } else {
                column += 1
            }
            i += 1
        }
        while i < chars.count {
            let c = chars[i]
            let (l, col) = (line, column)
            if c.isWhitespace {
                advance()
            } else if (c == "/" || c == "-") && i + 1 < chars.count && chars[i + 1] == c {
                while i < chars.count && chars[i] != "\n" { advance() }
            } else if c == "/" && i + 1 < chars.count && chars[i + 1] == "*" {
                advance()
                advance()
                while i < chars.count && !(chars[i] == "*" && i + 1 < chars.count && chars[i + 1] == "/") { advance() }
                guard i < chars.count else { throw SyntaxError(line: l, column: col, message: "unterminated /* comment") }
                advance()
                advance()
            } else if c == "\"" {
                advance()
                var s = ""
                while i < chars.count && chars[i] != "\"" && chars[i] != "\n" {
                    s.append(chars[i])
                    advance()
                }
                guard i < chars.count, chars[i] == "\"" else {
                    throw SyntaxError(line: l, column: col, message: "unterminated quoted identifier")
                }
                advance()
                out.append(Located(token: .quoted(s), line: l, column: col))
            } else if c.isLetter || c == "_" || c.isNumber {
                var s = ""
                while i < chars.count && (chars[i].isLetter || chars[i].isNumber || chars[i] == "_") {
                    s.append(chars[i])
                    advance()
                }
                out.append(Located(token: .word(s), line: l, column: col))
            } else if "(),;<>".contains(c) {
                out.append(Located(token: .symbol(c), line: l, column: col))
                advance()
            } else {
                throw SyntaxError(line: l, column: col, message: "unexpected character '\(c)'")
            }
        }
        out.append(Located(token: .end, line: line, column: column))
        return out
    }

    struct Parser {
        let tokens: [Located]
        var pos = 0
        var ignored: [String] = []
        var roles: [String] = []

        init(tokens: [Located]) { self.tokens = tokens }

        var peek: Located { tokens[pos] }

        mutating func next() -> Located {
            defer { if pos < tokens.count - 1 { pos += 1 } }
            return tokens[pos]
        }

        func fail(_ message: String, at t: Located? = nil) -> SyntaxError {
            let t = t ?? peek
            return SyntaxError(line: t.line, column: t.column, message: message)
        }

        func describe(_ t: Token) -> String {
            switch t {
            case .word(let w): "'\(w)'"
            case .quoted(let q): "\"\(q)\""
            case .symbol(let c): "'\(c)'"
            case .end: "the end"
            }
        }

        func isKeyword(_ t: Token, _ k: String) -> Bool {
            if case .word(let w) = t { return w.uppercased() == k }
            return false
        }

        mutating func keyword(_ k: String) throws {
            guard isKeyword(peek.token, k) else { throw fail("expected \(k), found \(describe(peek.token))") }
            _ = next()
        }

        mutating func symbol(_ c: Character, _ what: String) throws {
            guard peek.token == .symbol(c) else { throw fail("expected \(what), found \(describe(peek.token))") }
            _ = next()
        }

        /// An identifier: a word that is not a reserved word, or a quoted name.
        mutating func name(_ what: String) throws -> (String, quoted: Bool) {
            let t = next()
            switch t.token {
            case .quoted(let q):
                guard !q.isEmpty else { throw fail("empty \(what)", at: t) }
                return (q, true)
            case .word(let w):
                if ["GRANT", "PREFERRED", "QUERYABLE", "SORTABLE", "SEARCHABLE"].contains(w.uppercased()) {
                    throw fail("expected \(what), found the reserved word \(w) (quote it: \"\(w)\")", at: t)
                }
                return (w, false)
            default: throw fail("expected \(what), found \(describe(t.token))", at: t)
            }
        }

        mutating func document() throws -> Document {
            try keyword("DEFINE")
            try keyword("SCHEMA")
            var types: [RecordType] = []
            while peek.token != .end {
                if isKeyword(peek.token, "CREATE") {
                    _ = next()
                    try keyword("ROLE")
                    let roleAt = peek
                    let (role, _) = try name("a role name")
                    guard !SecurityPolicy.builtInRoles.contains(role) else {
                        throw fail("role '\(role)' is built in; it cannot be created", at: roleAt)
                    }
                    guard Self.isIdentifier(role) else {
                        throw fail(
                            "role name '\(role)' is invalid: it must start with a letter and contain only letters, digits and underscores",
                            at: roleAt)
                    }
                    guard !roles.contains(role) else { throw fail("role '\(role)' is already created", at: roleAt) }
                    roles.append(role)
                } else if isKeyword(peek.token, "RECORD") {
                    let t = try recordType()
                    if let other = types.first(where: { $0.name == t.name }) {
                        throw SyntaxError(
                            line: t.line, column: t.column, message: "record type '\(t.name)' is already defined on line \(other.line)")
                    }
                    types.append(t)
                } else {
                    throw fail("expected RECORD TYPE or CREATE ROLE, found \(describe(peek.token))")
                }
                try symbol(";", "';' after the definition")
            }
            return Document(recordTypes: types, roles: roles, ignored: ignored)
        }

        mutating func recordType() throws -> RecordType {
            try keyword("RECORD")
            try keyword("TYPE")
            let at = peek
            let (typeName, _) = try name("a record type name")
            guard Self.isIdentifier(typeName) else {
                throw fail(
                    "record type name '\(typeName)' is invalid: it must start with a letter and contain only letters, digits and underscores",
                    at: at)
            }
            try symbol("(", "'(' after the record type name")
            var fields: [Field] = []
            var indexes: [(CompositeIndex, Located)] = []
            var grants: [String: RecordPermissions]?
            repeat {
                if isKeyword(peek.token, "INDEX"), isName(tokens[pos + 1].token), tokens[pos + 2].token == .symbol("(") {
                    let at = peek
                    let index = try compositeIndex()
                    if indexes.contains(where: { $0.0.name == index.name }) {
                        throw fail("index '\(index.name)' of record type '\(typeName)' is already defined", at: at)
                    }
                    indexes.append((index, at))
                } else if isKeyword(peek.token, "GRANT") {
                    _ = next()
                    var permissions: RecordPermissions = []
                    repeat {
                        let p = next()
                        guard case .word(let w) = p.token, ["READ", "CREATE", "WRITE"].contains(w.uppercased()) else {
                            throw fail("expected READ, CREATE or WRITE, found \(describe(p.token))", at: p)
                        }
                        permissions.insert(w.uppercased() == "READ" ? .read : w.uppercased() == "CREATE" ? .create : .write)
                    } while peek.token == .symbol(",") && isPermission(tokens[pos + 1].token) && next().token == .symbol(",")
                    try keyword("TO")
                    let roleAt = peek
                    let (role, _) = try name("a role name")
                    guard SecurityPolicy.builtInRoles.contains(role) || Self.isIdentifier(role) else {
                        throw fail("role name '\(role)' is invalid", at: roleAt)
                    }
                    grants = grants ?? [:]
                    grants![role, default: []].formUnion(permissions)
                } else {
                    let f = try field(of: typeName)
                    if let other = fields.first(where: { $0.name == f.name }) {
                        throw SyntaxError(
                            line: f.line, column: f.column,
                            message: "field '\(f.name)' of record type '\(typeName)' is already defined on line \(other.line)")
                    }
                    fields.append(f)
                }
            } while peek.token == .symbol(",") && next().token == .symbol(",")
            try symbol(")", "',' or ')' after a field")
            for (index, place) in indexes {
                let problem = index.problem(recordType: typeName) { f in
                    fields.first { $0.name == f && !($0.isSystem && SystemField(rawValue: f) == nil) }?.type ?? SystemField(rawValue: f)?.type
                }
                if let problem { throw fail(problem, at: place) }
            }
            return RecordType(
                name: typeName, fields: fields, indexes: indexes.map(\.0), grants: grants, line: at.line, column: at.column)
        }

        /// `INDEX name (field [ASC|DESC], …)`; system fields by their quoted names.
        mutating func compositeIndex() throws -> CompositeIndex {
            try keyword("INDEX")
            let (name, _) = try name("an index name")
            try symbol("(", "'(' after the index name")
            var components: [IndexComponent] = []
            repeat {
                let at = peek
                let (field, quoted) = try self.name("a field name")
                var canonical = field
                if quoted, let s = SchemaLanguage.systemFields.first(where: { $0.name == field }) {
                    guard let f = s.field else { throw fail("system field \"\(field)\" cannot be indexed", at: at) }
                    canonical = f
                }
                var descending = false
                if isKeyword(peek.token, "DESC") {
                    _ = next()
                    descending = true
                } else if isKeyword(peek.token, "ASC") {
                    _ = next()
                }
                components.append(IndexComponent(canonical, descending: descending))
            } while peek.token == .symbol(",") && next().token == .symbol(",")
            try symbol(")", "',' or ')' after an index field")
            return CompositeIndex(name: name, components: components)
        }

        /// Whether `t` can be a name (a word or a quoted name): `INDEX` followed by one and `(` declares an index, and
        /// is otherwise a field named `INDEX`.
        func isName(_ t: Token) -> Bool {
            switch t {
            case .word, .quoted: true
            default: false
            }
        }

        func isPermission(_ t: Token) -> Bool { ["READ", "CREATE", "WRITE"].contains { isKeyword(t, $0) } }

        mutating func field(of typeName: String) throws -> Field {
            let at = peek
            let (fieldName, quoted) = try name("a field name")
            let typeAt = peek
            let type = try dataType()
            var flags: IndexFlags = []
            while case .word(let w) = peek.token, ["QUERYABLE", "SORTABLE", "SEARCHABLE"].contains(w.uppercased()) {
                _ = next()
                switch w.uppercased() {
                case "QUERYABLE": flags.insert(.queryable)
                case "SORTABLE": flags.insert(.sortable)
                default: flags.insert(.searchable)
                }
            }
            var name = fieldName
            var system = false
            if fieldName.hasPrefix("_") {
                guard quoted, let s = SchemaLanguage.systemFields.first(where: { $0.name == fieldName }) else {
                    throw fail(
                        "unknown system field '\(fieldName)' (system fields are \(SchemaLanguage.systemFields.map { "\"\($0.name)\"" }.joined(separator: ", ")))",
                        at: at)
                }
                guard type == s.type else {
                    throw fail("system field \"\(fieldName)\" is \(SchemaLanguage.typeName(s.type)), not \(SchemaLanguage.typeName(type))", at: typeAt)
                }
                guard let canonical = s.field else {
                    if !flags.isEmpty { ignored.append("line \(at.line): options on \"\(fieldName)\" (not indexable)") }
                    return Field(name: fieldName, type: type, indexes: [], isSystem: true, line: at.line, column: at.column)
                }
                name = canonical
                system = true
            } else if !Self.isIdentifier(fieldName) {
                throw fail(
                    "field name '\(fieldName)' is invalid: it must start with a letter and contain only letters, digits and underscores",
                    at: at)
            }
            if let problem = IndexFlags.problem(flags, for: type, system: system) {
                throw fail("field '\(fieldName)' cannot be \(flags): \(problem)", at: at)
            }
            return Field(name: name, type: type, indexes: flags, isSystem: system, line: at.line, column: at.column)
        }

        mutating func dataType() throws -> FieldType {
            if isKeyword(peek.token, "LIST") {
                _ = next()
                try symbol("<", "'<' after LIST")
                let inner = try primitive()
                try symbol(">", "'>' to close LIST<")
                return FieldType(inner, list: true)
            }
            return FieldType(try primitive())
        }

        mutating func primitive() throws -> ScalarType {
            let t = next()
            guard case .word(let w) = t.token else { throw fail("expected a type, found \(describe(t.token))", at: t) }
            switch w.uppercased() {
            case "ASSET": return .asset
            case "BYTES": return .bytes
            case "DOUBLE": return .double
            case "INT64": return .int64
            case "LOCATION": return .location
            case "REFERENCE": return .reference
            case "STRING": return .string
            case "TIMESTAMP": return .timestamp
            case "ENCRYPTED": throw fail("ENCRYPTED fields are not supported", at: t)
            case "NUMBER":
                guard isKeyword(peek.token, "PREFERRED") else {
                    throw fail("NUMBER needs PREFERRED AS INT64 or PREFERRED AS DOUBLE", at: t)
                }
                _ = next()
                try keyword("AS")
                let p = next()
                if isKeyword(p.token, "INT64") { return .int64 }
                if isKeyword(p.token, "DOUBLE") { return .double }
                throw fail("expected INT64 or DOUBLE after PREFERRED AS, found \(describe(p.token))", at: p)
            default:
                throw fail(
                    "unknown type '\(w)' (types: ASSET, BYTES, DOUBLE, INT64, LOCATION, REFERENCE, STRING, TIMESTAMP, LIST<…>)",
                    at: t)
            }
        }

        /// CloudKit's rule for type and field names (``Names/validateIdentifier(_:what:)``).
        static func isIdentifier(_ s: String) -> Bool { (try? Names.validateIdentifier(s, what: "name")) != nil }
    }
}

/// What a schema import added to the development schema.
public struct SchemaImportResult: Sendable, Hashable {
    /// Record types added.
    public var recordTypes: [String] = []
    /// Fields added, as `Type.field`.
    public var fields: [String] = []
    /// Index options added, as `Type.field QUERYABLE …`, and composite indexes, as `Type INDEX name (…)`.
    public var indexes: [String] = []
    /// Custom roles created.
    public var roles: [String] = []
    /// Record types whose grants changed, as `Type: GRANT READ TO _world, …`.
    public var grants: [String] = []
    /// Statements read but without effect (options on `___etag`).
    public var ignored: [String] = []

    /// Whether the import changed nothing.
    public var isEmpty: Bool { recordTypes.isEmpty && fields.isEmpty && indexes.isEmpty && roles.isEmpty && grants.isEmpty }
}

extension SchemaCatalog {
    /// The mutations that add a schema text's types, fields and index options to a schema (additive: nothing is
    /// removed). - Throws: `invalidArguments` naming the line, column and field of a type that contradicts the
    /// schema.
    func importing(_ doc: SchemaLanguage.Document, into key: SchemaKey) throws -> ([Mutation], SchemaImportResult) {
        var out: [Mutation] = []
        var result = SchemaImportResult(ignored: doc.ignored)
        for t in doc.recordTypes {
            let existing = recordType(key, t.name)
            if existing == nil {
                out.append(.schemaField(key, recordType: t.name, field: nil, type: nil))
                result.recordTypes.append(t.name)
            }
            for f in t.fields where !(f.isSystem && SystemField(rawValue: f.name) == nil) {
                if !f.isSystem {
                    if let have = existing?.fields[f.name] {
                        guard have == f.type else {
                            throw CloudletError.invalid(
                                "line \(f.line), column \(f.column): field '\(f.name)' of record type '\(t.name)' is \(have) in the "
                                    + "\(key.environment.rawValue) schema; the text says \(f.type) (a field's type cannot change)")
                        }
                    } else {
                        out.append(.schemaField(key, recordType: t.name, field: f.name, type: f.type))
                        result.fields.append("\(t.name).\(f.name)")
                    }
                }
                let missing = f.indexes.subtracting(existing?.indexes[f.name] ?? [])
                if !missing.isEmpty {
                    out.append(.index(.flags(key, recordType: t.name, field: f.name, missing)))
                    result.indexes.append("\(t.name).\(f.name) \(missing)")
                }
            }
            for index in t.indexes {
                if let have = existing?.composites[index.name] {
                    guard have == index else {
                        throw CloudletError.invalid(
                            "line \(t.line), column \(t.column): index '\(index.name)' of record type '\(t.name)' is \(have) in "
                                + "the \(key.environment.rawValue) schema; the text says \(index) (remove it first to change it)")
                    }
                    continue
                }
                // The parser checked the index against the text's fields, which the schema now has.
                out.append(.index(.composite(key, recordType: t.name, name: index.name, components: index.components)))
                result.indexes.append("\(t.name) INDEX \(index)")
            }
        }
        return (out, result)
    }
}

extension SecurityCatalog {
    /// The mutations that add a schema text's roles and set the grants of each record type that has GRANT clauses
    /// (a type without any keeps its grants). - Throws: `invalidArguments` naming a grant to a role that is neither
    /// built in, nor created by the text, nor in the schema.
    func importing(_ doc: SchemaLanguage.Document, into key: SchemaKey, result: inout SchemaImportResult) throws -> [Mutation] {
        let policy = policy(key)
        var out: [Mutation] = []
        for role in doc.roles where !policy.roles.contains(role) {
            out.append(.security(.createRole(key, role: role)))
            result.roles.append(role)
        }
        let known = policy.roles.union(doc.roles).union(SecurityPolicy.builtInRoles)
        for t in doc.recordTypes {
            guard let grants = t.grants else { continue }
            for role in grants.keys.sorted() where !known.contains(role) {
                throw CloudletError.invalid(
                    "line \(t.line), column \(t.column): record type '\(t.name)' grants to role '\(role)', which does not exist "
                        + "(create it with CREATE ROLE \(role);)")
            }
            guard grants != policy.grants(for: t.name) else { continue }
            out.append(.security(.grants(key, recordType: t.name, grants: grants)))
            result.grants.append("\(t.name): " + grants.keys.sorted().map { "GRANT \(grants[$0]!) TO \($0)" }.joined(separator: ", "))
        }
        return out
    }
}

extension Container {
    /// The schema of an environment in the CloudKit Schema Language (for `cloudlet schema export`, and the admin
    /// endpoint of the server).
    public func exportSchema(environment: Environment = .development) -> String {
        SchemaLanguage.format(
            schema(environment: environment),
            security: store.catalog.snapshot().security.policy(SchemaKey(container: identifier, environment: environment)))
    }

    /// Adds a schema text's record types, fields and index options to the development schema, in one commit:
    /// additive (nothing the text omits is removed, and an option already set stays), and all or nothing. New
    /// indexes are built in the background over existing records. Deploy to reach production.
    /// - Throws: `invalidArguments` whose message starts with the line and column of the problem: a syntax error,
    ///   an invalid name, options that do not fit a type, or a field whose type contradicts the schema.
    @discardableResult
    public func importSchema(_ text: String) async throws -> SchemaImportResult {
        try store.checkOpen()
        let doc: SchemaLanguage.Document
        doc = try SchemaLanguage.parse(text)
        let key = SchemaKey(container: identifier, environment: .development)
        let store = self.store
        return try await ThreadBridge.offload {
            try store.changeCatalog { st in
                var (mutations, result) = try st.schema.importing(doc, into: key)
                mutations += try st.security.importing(doc, into: key, result: &result)
                return (mutations, result)
            }
        }
    }
}
