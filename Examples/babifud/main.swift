import CloudletCommandLine
import ExampleSupport
import Foundation

// BabiFud: establishments in the public database, with a location and an optional photo (an asset); "near me"
// queries sorted by distance; the user's private notes about an establishment, fetched by their IDs.

let usage = """
    USAGE: babifud <command> [options]

    COMMANDS:
      add NAME --lat LAT --lon LON [--photo FILE] [--changing-table]
                                  an establishment (public database; needs a signed-in user)
      near --lat LAT --lon LON [--km KM]
                                  establishments within KM (default 10) km, nearest first, with their distance
      show NAME                   one establishment, with its photo's size
      note NAME TEXT              a private note about an establishment
      notes NAME                  your notes about it, fetched by their IDs

    \(ExampleSession.help(container: "iCloud.com.example.babifud"))
    """

func id(_ name: String) -> RecordID { RecordID(recordName: "place-" + name) }

func coordinate(_ o: CommandLineOptions, _ name: String, _ range: ClosedRange<Double>) throws -> Double {
    guard let text = o[name] else { throw UsageError(message: "\(name) is required") }
    guard let v = Double(text), range.contains(v) else { throw UsageError(message: "\(name) must be a number in \(range)") }
    return v
}

func babifud(_ command: String, _ rest: [String], _ o: CommandLineOptions, _ session: ExampleSession) async throws -> Int32 {
    let publicDB = try session.database(.public)
    let privateDB = try session.database(.private)
    switch command {
    case "add":
        guard rest.count == 1 else { throw UsageError(message: "add takes the establishment's name") }
        var place = Record(recordType: "Establishment", id: id(rest[0]))
        place["name"] = .string(rest[0])
        place["location"] = .location(
            Location(latitude: try coordinate(o, "--lat", -90...90), longitude: try coordinate(o, "--lon", -180...180)))
        place["changingTable"] = .int64(o.has("--changing-table") ? 1 : 0)
        if let photo = o["--photo"] { place["photo"] = .asset(AssetReference(contentsOfFile: photo)) }
        try await publicDB.save(place, policy: .allKeys)
        print("added \(rest[0])")
    case "near":
        guard rest.isEmpty else { throw UsageError(message: "near takes no arguments") }
        let here = Location(latitude: try coordinate(o, "--lat", -90...90), longitude: try coordinate(o, "--lon", -180...180))
        let radius = o["--km"].flatMap(Double.init) ?? 10
        let q = Query(
            recordType: "Establishment",
            predicate: .comparison(Comparison("location", .near, .location(here), distance: radius)),
            sortDescriptors: [.distance("location", from: here)])
        let found = try await publicDB.query(q).records
        for p in found {
            guard case .location(let l)? = p["location"] else { continue }
            print("\(text(p["name"]))\t\(String(format: "%.1f", Geo.distanceKilometres(here, l))) km\(p["changingTable"] == .int64(1) ? "\tchanging table" : "")")
        }
        if found.isEmpty { print("(nothing within \(radius) km)") }
    case "show":
        guard rest.count == 1 else { throw UsageError(message: "show takes a name") }
        let p = try await publicDB.record(for: id(rest[0]))
        var line = "\(text(p["name"]))\t\(text(p["location"]))"
        if case .asset(let a)? = p["photo"] {
            let bytes = try await publicDB.assetData(a)
            line += "\tphoto \(bytes.count) bytes"
        }
        print(line)
    case "note":
        guard rest.count == 2 else { throw UsageError(message: "note takes a name and the note's text") }
        _ = try await publicDB.record(for: id(rest[0]))
        // Notes live in the private database; a reference cannot cross databases, so the note names the
        // establishment, and the establishment's notes are found by their IDs (kept in a private index record).
        let noteID = RecordID(recordName: "note-\(rest[0])-\(UUID().uuidString.lowercased().prefix(8))")
        var note = Record(recordType: "Note", id: noteID)
        note["establishment"] = .string(rest[0])
        note["text"] = .string(rest[1])
        let indexID = RecordID(recordName: "notes-of-\(rest[0])")
        var index = (try? await privateDB.record(for: indexID)) ?? Record(recordType: "NoteIndex", id: indexID)
        var ids: [FieldValue] = if case .list(_, let items)? = index["notes"] { items } else { [] }
        ids.append(.string(noteID.recordName))
        index["notes"] = .list(.string, ids)
        let results = try await privateDB.modify([.forceReplace(note), .forceReplace(index)], atomic: true)
        if let e = results.compactMap(\.error).first { throw e }
        print("noted \(noteID.recordName)")
    case "notes":
        guard rest.count == 1 else { throw UsageError(message: "notes takes a name") }
        guard let index = try? await privateDB.record(for: RecordID(recordName: "notes-of-\(rest[0])")),
            case .list(_, let items)? = index["notes"]
        else {
            print("(no notes)")
            return 0
        }
        let ids = items.compactMap { v -> RecordID? in if case .string(let s) = v { RecordID(recordName: s) } else { nil } }
        for result in try await privateDB.records(for: ids) {
            if case .success(let n) = result { print("\(n.recordName)\t\(text(n["text"]))") }
        }
    default:
        throw UsageError(message: "unknown command '\(command)'")
    }
    return 0
}

await runExample(usage: usage, container: "iCloud.com.example.babifud", valued: ["--lat", "--lon", "--km", "--photo"], flags: ["--changing-table"]) { command, arguments, options, session in
    try await babifud(command, arguments, options, session)
}
