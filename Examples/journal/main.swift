import CloudletCommandLine
import CloudletCore
import ExampleSupport
import Foundation

// Journal: entries in the user's private database — add, list newest first, edit (a stale edit meets the newer
// version as a conflict), delete. The same code runs on an embedded store and against a server.

let usage = """
    USAGE: journal <command> [options]

    COMMANDS:
      add TEXT [--title T]        a new entry; prints its ID
      list [--limit N]            entries, newest first: ID, title, text
      edit ID TEXT [--tag TAG]    changes an entry's text; with --tag, only if it is still the version TAG (the tag
                                  `show` prints): a newer version is a conflict, shown with what it holds
      show ID                     one entry, with its change tag
      delete ID

    \(ExampleSession.help(container: "iCloud.com.example.journal"))
    """

/// One command against the journal's database.
func journal(_ command: String, _ rest: [String], _ o: CommandLineOptions, _ db: any CloudletDatabase) async throws -> Int32 {
    switch command {
    case "add":
        guard rest.count == 1 else { throw UsageError(message: "add takes the entry's text") }
        let id = "entry-" + UUID().uuidString.lowercased().prefix(8)
        var entry = Record(recordType: "Entry", recordName: String(id))
        entry["text"] = .string(rest[0])
        entry["title"] = .string(o["--title"] ?? String(rest[0].prefix(20)))
        entry["written"] = .timestamp(Int64(Date().timeIntervalSince1970 * 1000))
        let saved = try await db.save(entry)
        print("added \(saved.recordName)")
    case "list":
        let limit = try o.integer("--limit", in: 1...200) ?? 50
        let page = try await db.query(Query(recordType: "Entry", sortDescriptors: [.descending("written")]), resultsLimit: limit)
        for r in page.records { print("\(r.recordName)\t\(text(r["title"]))\t\(text(r["text"]))") }
        if page.records.isEmpty { print("(no entries)") }
    case "show":
        guard rest.count == 1 else { throw UsageError(message: "show takes an entry ID") }
        let r = try await db.record(for: RecordID(recordName: rest[0]))
        print("\(r.recordName)\ttag \(r.changeTag ?? "")\t\(text(r["title"]))\t\(text(r["text"]))")
    case "edit":
        guard rest.count == 2 else { throw UsageError(message: "edit takes an entry ID and its new text") }
        var r = try await db.record(for: RecordID(recordName: rest[0]))
        if let tag = o["--tag"] { r.changeTag = tag }
        r["text"] = .string(rest[1])
        do {
            let saved = try await db.save(r)
            print("edited \(saved.recordName), tag \(saved.changeTag ?? "")")
        } catch let e as CloudletError where e.code == .serverRecordChanged {
            let server = e.serverRecord
            print("conflict: \(rest[0]) changed since version \(r.changeTag ?? ""); it now says: \(text(server?["text"]))")
            print("(run edit again without --tag to overwrite it, or with --tag \(server?.changeTag ?? ""))")
            return 2
        }
    case "delete":
        guard rest.count == 1 else { throw UsageError(message: "delete takes an entry ID") }
        try await db.deleteRecord(RecordID(recordName: rest[0]))
        print("deleted \(rest[0])")
    default:
        throw UsageError(message: "unknown command '\(command)'")
    }
    return 0
}

await runExample(usage: usage, container: "iCloud.com.example.journal", valued: ["--title", "--limit", "--tag"]) { command, arguments, options, session in
    try await journal(command, arguments, options, try session.database(.private))
}
