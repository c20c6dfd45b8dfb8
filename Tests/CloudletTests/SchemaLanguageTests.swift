import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// The CloudKit Schema Language: reading Apple's grammar, writing it back, importing into development.
@Suite struct SchemaLanguageTests {
    static let apple = """
        DEFINE SCHEMA
            // A custom role, granted to below.
            CREATE ROLE DeptManager;

            RECORD TYPE Department (
                "___createTime" TIMESTAMP QUERYABLE SORTABLE,
                "___recordID" REFERENCE QUERYABLE,
                name STRING QUERYABLE SORTABLE SEARCHABLE,
                address STRING,
                phone LIST<STRING>,
                employees LIST<REFERENCE>,
                logo ASSET,
                "grant" INT64,  -- a keyword as a name, quoted
                budget NUMBER PREFERRED AS DOUBLE,
                /* a location,
                   for NEAR */
                site LOCATION QUERYABLE,
                GRANT WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ TO "_world",
                GRANT WRITE, CREATE, READ TO DeptManager
            );

            RECORD TYPE Employee (
                "___etag" STRING,
                name STRING,
                hiredate TIMESTAMP SORTABLE,
                salary INT64
            );
        """

    @Test func readsApplesGrammar() throws {
        let doc = try SchemaLanguage.parse(Self.apple)
        #expect(doc.recordTypes.map(\.name) == ["Department", "Employee"])
        let dept = doc.recordTypes[0]
        let byName = Dictionary(uniqueKeysWithValues: dept.fields.map { ($0.name, $0) })
        #expect(byName["createdTimestamp"]?.indexes == [.queryable, .sortable] && byName["createdTimestamp"]?.isSystem == true)
        #expect(byName["recordName"]?.indexes == .queryable)
        #expect(byName["name"]?.indexes == [.queryable, .sortable, .searchable])
        #expect(byName["phone"]?.type == FieldType(.string, list: true))
        #expect(byName["employees"]?.type == FieldType(.reference, list: true))
        #expect(byName["logo"]?.type == FieldType(.asset))
        #expect(byName["grant"]?.type == FieldType(.int64))
        #expect(byName["budget"]?.type == FieldType(.double))
        #expect(byName["site"]?.indexes == .queryable && byName["site"]?.line == 17)
        #expect(doc.ignored.isEmpty, "\(doc.ignored)")
        #expect(doc.roles == ["DeptManager"])
        #expect(dept.grants == ["_creator": .write, "_icloud": .create, "_world": .read, "DeptManager": .all])
        #expect(doc.recordTypes[1].grants == nil)
    }

    /// Each bad text, the line and column the error must name, and words its message must contain.
    @Test(arguments: [
        ("RECORD TYPE A (x STRING);", 1, 1, "expected DEFINE"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x STRNG);", 2, 18, "unknown type 'STRNG'"),
        ("DEFINE SCHEMA\nRECORD TYPE A (\n  x STRING,\n  y INT64 SORTABLE SEARCHABLE\n);", 4, 3, "only STRING and LIST<STRING>"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x STRING)", 2, 25, "expected ';'"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x STRING y INT64);", 2, 25, "',' or ')'"),
        ("DEFINE SCHEMA\nRECORD TYPE A (queryable STRING);", 2, 16, "reserved word queryable"),
        ("DEFINE SCHEMA\nRECORD TYPE A (\"___nope\" STRING);", 2, 16, "unknown system field"),
        ("DEFINE SCHEMA\nRECORD TYPE A (\"___recordID\" STRING);", 2, 30, "is REFERENCE, not STRING"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x ENCRYPTED STRING);", 2, 18, "ENCRYPTED fields are not supported"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x NUMBER);", 2, 18, "PREFERRED AS"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x LIST<STRING> SORTABLE);", 2, 16, "LIST fields cannot be SORTABLE"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x STRING, x INT64);", 2, 26, "already defined"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x STRING);\nRECORD TYPE A (y STRING);", 3, 13, "already defined on line 2"),
        ("DEFINE SCHEMA\nRECORD TYPE 9a (x STRING);", 2, 13, "record type name '9a' is invalid"),
        ("DEFINE SCHEMA\n/* open", 2, 1, "unterminated /* comment"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x STRING) ; @", 2, 28, "unexpected character '@'"),
        ("DEFINE SCHEMA\nRECORD TYPE A (GRANT READ TO);", 2, 29, "expected a role name"),
        // Composite indexes (CompositeIndexTests has the rest).
        ("DEFINE SCHEMA\nRECORD TYPE A (x INT64, y INT64,\n INDEX i (x, z));", 3, 2, "index 'i' of record type 'A': field 'z' is not in the schema"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x INT64, y LOCATION,\n INDEX i (x, y));", 3, 2, "field 'y' is LOCATION"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x INT64, y LIST<INT64>,\n INDEX i (x, y));", 3, 2, "field 'y' is LIST<INT64>"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x INT64, y INT64,\n INDEX i (x));", 3, 2, "has 1 field; a composite index takes 2 to 8"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x INT64, y INT64,\n INDEX i (x, x));", 3, 2, "names field 'x' twice"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x INT64, y INT64,\n INDEX i (x, y), INDEX i (y, x));", 3, 18, "index 'i' of record type 'A' is already defined"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x INT64, y INT64,\n INDEX i (x y));", 3, 13, "',' or ')' after an index field"),
        ("DEFINE SCHEMA\nRECORD TYPE A (x INT64, \"___etag\" STRING,\n INDEX i (x, \"___etag\"));", 3, 14, "cannot be indexed"),
    ])
    func errorsNameLineAndColumn(text: String, line: Int, column: Int, words: String) {
        do {
            let doc = try SchemaLanguage.parse(text)
            Issue.record("parsed: \(doc)")
        } catch let wrapped as CloudletError {
            #expect(wrapped.code == .invalidArguments)
            guard let e = wrapped.cause as? SchemaLanguage.SyntaxError else {
                Issue.record("no syntax error in \(wrapped)")
                return
            }
            #expect(e.line == line && e.column == column, "\(e)")
            #expect(e.message.contains(words), "\(e)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func exportImportRoundTripAndImportIsAdditive() async throws {
        let dir = TempDir("schema-language")
        let store = try await openStore(dir)
        let a = try store.container("iCloud.com.example.a")
        let db = try a.privateDatabase(user: "u")
        var r = Record(recordType: "Book", recordName: "b1")
        r["title"] = "T"
        r["tags"] = .list(.string, ["x"])
        r["where"] = .location(Location(latitude: 1, longitude: 2))
        r["cover"] = .asset(AssetReference(data: [1, 2, 3]))
        _ = try await db.save(r)
        try await a.addIndexes([.queryable, .searchable], recordType: "Book", field: "title")
        try await a.addIndexes(.sortable, recordType: "Book", field: "modificationDate")
        try await a.addIndexes(.queryable, recordType: "Book", field: "where")
        let text = a.exportSchema()
        #expect(text.contains("title STRING QUERYABLE SEARCHABLE"), "\(text)")
        #expect(text.contains("\"___modTime\" TIMESTAMP SORTABLE"))
        #expect(text.contains("cover ASSET") && text.contains("tags LIST<STRING>") && text.contains("\"___etag\" STRING"))

        let b = try store.container("iCloud.com.example.b")
        let result = try await b.importSchema(text)
        #expect(result.recordTypes == ["Book"] && result.fields.count == 4 && result.indexes.count == 3, "\(result)")
        #expect(b.exportSchema() == text, "round trip")
        #expect(try await b.importSchema(text).isEmpty, "importing again adds nothing")
        #expect(try await b.importSchema("DEFINE SCHEMA").isEmpty)
        #expect(b.exportSchema() == text, "an import never removes anything")
        #expect(b.exportSchema(environment: .production) == "DEFINE SCHEMA\n")

        // Additive changes, all or nothing; contradictions name their line and column.
        let more = """
            DEFINE SCHEMA
                RECORD TYPE Book (
                    title STRING SORTABLE,
                    pages INT64 QUERYABLE
                );
                RECORD TYPE Shelf ( label STRING );
            """
        let added = try await b.importSchema(more)
        #expect(added.recordTypes == ["Shelf"] && added.fields == ["Book.pages", "Shelf.label"])
        #expect(added.indexes == ["Book.title SORTABLE", "Book.pages QUERYABLE"])
        let book = b.schema(environment: .development).first { $0.name == "Book" }!
        #expect(book.indexes["title"] == [.queryable, .sortable, .searchable])
        let bad = "DEFINE SCHEMA\n  RECORD TYPE Zed ( a STRING );\n  RECORD TYPE Book (\n    pages STRING\n  );"
        let e = await expectError(.invalidArguments) { try await b.importSchema(bad) }
        #expect(e?.message.hasPrefix("line 4, column 5: field 'pages' of record type 'Book' is INT64") == true, "\(e?.message ?? "")")
        #expect(!b.exportSchema().contains("Zed"), "nothing of a failed import is applied")
        let syntax = await expectError(.invalidArguments) { try await b.importSchema("DEFINE SCHEMA RECORD TYPE") }
        #expect(syntax?.message.hasPrefix("line 1, column 26:") == true, "\(syntax?.message ?? "")")
        try await store.close()
    }
}
