import CloudletConcurrency
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// `cloudlet schema …` and `cloudlet query …` on a store directory, through the built executable. (Few runs: a
/// child process briefly shares the parent's open files, store locks included, until it execs.)
@Suite struct QueryCommandTests {
    /// Runs the executable to completion: exit status, standard output, standard error (waiting outside the
    /// cooperative pool).
    func cloudlet(_ args: [String], stdin: String? = nil) async throws -> (status: Int32, out: String, err: String) {
        try await ThreadBridge.offload { try Self.run(args, stdin: stdin) }
    }

    static func run(_ args: [String], stdin: String?) throws -> (status: Int32, out: String, err: String) {
        let r = try SpawnedProcess.run(try cloudletExecutable(), args, input: stdin.map { Data($0.utf8) })
        return (r.status, String(decoding: r.stdout, as: UTF8.self), String(decoding: r.stderr, as: UTF8.self))
    }

    @Test func schemaAndQueryCommands() async throws {
        let dir = TempDir("cli-query")
        let path = dir.sub("store")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).publicDatabase()
        _ = try await db.modify(
            (0..<30).map { i in
                .create(Record(recordType: "Song", recordName: "s\(i)", fields: ["title": .string("Song \(i)"), "plays": .int64(Int64(i % 10))]))
            })
        try await store.close()
        let base = ["--data", path, "--container", testContainer]

        let schema = """
            DEFINE SCHEMA
                RECORD TYPE Song (
                    "___recordID" REFERENCE QUERYABLE,
                    plays INT64 QUERYABLE SORTABLE,
                    title STRING SEARCHABLE
                );
            """
        let imported = try await cloudlet(["schema", "import"] + base, stdin: schema)
        #expect(imported.status == 0, "\(imported.err)")
        #expect(imported.out.contains("added index Song.plays QUERYABLE SORTABLE"))
        let json = try await cloudlet(["query"] + base + ["--type", "Song", "--predicate", "plays >= 7", "--sort", "plays:desc", "--limit", "5", "--json"])
        #expect(json.status == 0, "\(json.err)")
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        let records = try #require(obj["records"] as? [[String: Any]])
        #expect(records.count == 5)
        #expect(records.compactMap { ($0["fields"] as? [String: Any])?["plays"] as? [String: Any] }.map { $0["value"] as? Int } == [9, 9, 9, 8, 8])
        let marker = try #require(obj["continuationMarker"] as? String)
        let next = try await cloudlet(["query"] + base + ["--type", "Song", "--predicate", "plays >= 7", "--sort", "plays:desc", "--continue", marker])
        #expect(next.status == 0 && next.out.contains("(4 records)"), "\(next)")

        let explain = try await cloudlet(["query"] + base + ["--type", "Song", "--predicate", "plays == 3", "--explain"])
        #expect(explain.out.contains("equality index on 'plays'") && explain.out.contains("3 candidates of 30"), "\(explain)")
        let bad = try await cloudlet(["query"] + base + ["--type", "Song", "--predicate", "plays =="])
        #expect(bad.status == 64 && bad.err.contains("error: predicate \"plays ==\": expected a value"), "\(bad)")
        let badSchema = try await cloudlet(["schema", "import"] + base, stdin: "DEFINE SCHEMA\nRECORD TYPE Song ( plays STRING );")
        #expect(badSchema.status == 65 && badSchema.err.contains("line 2, column 20: field 'plays'"), "\(badSchema)")
        let deploy = try await cloudlet(["schema", "deploy"] + base)
        #expect(deploy.status == 0 && deploy.out.contains("deployed"), "\(deploy)")
    }

    /// `--user` names a private database's owner as `cloudlet user add` named them, or by userRecordName; a token
    /// search may end a word with `*` for every token it begins.
    @Test func aPrivateDatabaseIsNamedByItsUsersName() async throws {
        let dir = TempDir("cli-query-user")
        let path = dir.sub("store")
        let added = try await cloudlet(["user", "add", "ana", "--data", path])
        #expect(added.status == 0, "\(added)")
        let urn = try #require(added.out.firstMatch(of: /userRecordName (_[0-9a-f]+)/)?.1).description
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: urn)
        _ = try await db.modify(["swimming pool", "swift notes", "coffee"].enumerated().map { i, title in
            .create(Record(recordType: "Note", recordName: "n\(i)", fields: ["title": .string(title)]))
        })
        try await store.close()
        let base = ["query", "--data", path, "--container", testContainer, "--database", "private", "--type", "Note"]
        for who in ["ana", urn] {
            let all = try await cloudlet(base + ["--user", who])
            #expect(all.status == 0 && all.out.contains("(3 records)"), "\(who): \(all)")
        }
        let nobody = try await cloudlet(base + ["--user", "zed"])
        #expect(nobody.status == 0 && nobody.out.contains("(0 records)") && nobody.err.contains("no user is named 'zed'"), "\(nobody)")
        let prefix = try await cloudlet(base + ["--user", "ana", "--predicate", "self CONTAINS 'SWI*'", "--json"])
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(prefix.out.utf8)) as? [String: Any], "\(prefix)")
        #expect((obj["records"] as? [[String: Any]])?.compactMap { $0["recordName"] as? String }.sorted() == ["n0", "n1"])
    }

    /// A composite index declared by `cloudlet schema import`; `query --explain` names it, `--count --explain` says
    /// the count is read off it.
    @Test func compositeIndexesFromTheCommandLine() async throws {
        let dir = TempDir("cli-composite")
        let path = dir.sub("store")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).publicDatabase()
        _ = try await db.modify(
            (0..<40).map { i in
                .create(Record(recordType: "Song", recordName: "s\(i)", fields: ["album": .int64(Int64(i % 4)), "plays": .int64(Int64(i))]))
            })
        try await store.close()
        let base = ["--data", path, "--container", testContainer]
        let schema = "DEFINE SCHEMA\n RECORD TYPE Song (\n album INT64,\n plays INT64,\n INDEX byAlbum (album, plays DESC)\n );"
        let imported = try await cloudlet(["schema", "import"] + base, stdin: schema)
        #expect(imported.status == 0 && imported.out.contains("Song INDEX byAlbum (album, plays DESC)"), "\(imported)")
        let exported = try await cloudlet(["schema", "export"] + base)
        #expect(exported.out.contains("INDEX byAlbum (album, plays DESC)"), "\(exported)")
        let q = base + ["--type", "Song", "--predicate", "album == 1 AND plays >= 10"]
        let explain = try await cloudlet(["query"] + q + ["--sort", "plays:desc", "--explain"])
        #expect(explain.out.contains("composite index 'byAlbum' [1 equality and a range]"), "\(explain)")
        #expect(explain.out.contains("order: composite index 'byAlbum' within the range"), "\(explain)")
        let count = try await cloudlet(["query"] + q + ["--count"])
        #expect(count.status == 0 && count.out == "7\n", "\(count)")
        let countPlan = try await cloudlet(["query"] + q + ["--count", "--explain"])
        #expect(countPlan.out.contains("order: counted in the index, no record read"), "\(countPlan)")
    }
}
