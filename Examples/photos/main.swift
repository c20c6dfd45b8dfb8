import CloudletCommandLine
import ExampleSupport
import Foundation

// Photos: a photo library in a custom zone of the private database; each photo's image is an asset (the file is
// uploaded to the server, or copied into the embedded store); list shows titles and sizes, download writes a
// photo's file back out.

let usage = """
    USAGE: photos <command> [options]

    COMMANDS:
      add FILE [--title T]        a new photo; prints its ID
      list                        photos, by title: ID, title, size in bytes, SHA-256
      download ID OUT             writes the photo's file to OUT
      delete ID

    \(ExampleSession.help(container: "iCloud.com.example.photos"))
    """

let library = ZoneID(zoneName: "Library")

func photos(_ command: String, _ rest: [String], _ o: CommandLineOptions, _ db: any CloudletDatabase) async throws -> Int32 {
    if (try? await db.zone(for: library)) == nil { _ = try await db.createZone(library) }
    switch command {
    case "add":
        guard rest.count == 1 else { throw UsageError(message: "add takes an image file") }
        guard FileManager.default.isReadableFile(atPath: rest[0]) else { throw UsageError(message: "cannot read \(rest[0])") }
        var photo = Record(
            recordType: "Photo", recordName: "photo-" + UUID().uuidString.lowercased().prefix(8), zoneID: library)
        photo["title"] = .string(o["--title"] ?? URL(fileURLWithPath: rest[0]).lastPathComponent)
        photo["image"] = .asset(AssetReference(contentsOfFile: rest[0]))
        let saved = try await db.save(photo)
        print("added \(saved.recordName)")
    case "list":
        let page = try await db.query(Query(recordType: "Photo", sortDescriptors: [.ascending("title")]), zoneID: library)
        for p in page.records {
            guard case .asset(let a)? = p["image"] else { continue }
            print("\(p.recordName)\t\(text(p["title"]))\t\(a.size)\t\(a.fileChecksum)")
        }
        if page.records.isEmpty { print("(no photos)") }
    case "download":
        guard rest.count == 2 else { throw UsageError(message: "download takes a photo ID and an output file") }
        let p = try await db.record(for: RecordID(recordName: rest[0], zoneID: library))
        guard case .asset(let a)? = p["image"] else { throw CloudletError(.unknownItem, "photo \(rest[0]) has no image") }
        try await db.downloadAsset(a, to: rest[1])
        print("wrote \(a.size) bytes to \(rest[1])")
    case "delete":
        guard rest.count == 1 else { throw UsageError(message: "delete takes a photo ID") }
        try await db.deleteRecord(RecordID(recordName: rest[0], zoneID: library))
        print("deleted \(rest[0])")
    default:
        throw UsageError(message: "unknown command '\(command)'")
    }
    return 0
}

await runExample(usage: usage, container: "iCloud.com.example.photos", valued: ["--title"]) { command, arguments, options, session in
    try await photos(command, arguments, options, try session.database(.private))
}
