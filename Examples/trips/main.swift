import CloudletCommandLine
import CloudletCore
import ExampleSupport
import Foundation

// Trips: sharing. A user plans trips in a zone of their private database and shares one with another user, who
// accepts it by its short GUID, sees it in their shared database and (with write access) edits it and adds days
// to it; the owner stops sharing and it is gone for them. The same code runs on an embedded store (--user NAME picks
// the user) and against a server (the web auth token picks the user).

let usage = """
    USAGE: trips <command> [options]

    COMMANDS:
      add TITLE                    a new trip of yours; prints its ID
      list                         your trips: ID, title, and the share's short GUID when shared
      share ID USER [--write]      shares trip ID with USER (a user record name), read-only or with --write; prints
                                   the short GUID to give them
      unshare ID                   stops sharing trip ID (everyone loses it)
      accept GUID                  joins the trip a short GUID names
      shared                       the trips shared with you: OWNER, ID, title, and their days
      edit OWNER ID TITLE          renames a trip OWNER shared with you (needs write access)
      add-day OWNER ID PLAN        adds a day to a trip OWNER shared with you (needs write access)
      leave OWNER ID               stops seeing a trip OWNER shared with you

    \(ExampleSession.help(container: "iCloud.com.example.trips"))
    """

let zone = ZoneID(zoneName: "Trips")

func shareID(_ trip: String, in zone: ZoneID) -> RecordID { RecordID(recordName: "share-" + trip, zoneID: zone) }

/// One command, with the user's private, shared and public databases.
func trips(
    _ command: String, _ rest: [String], _ o: CommandLineOptions, mine: any CloudletDatabase, shared: any CloudletDatabase,
    pub: any CloudletDatabase
) async throws -> Int32 {
    func args(_ n: Int, _ what: String) throws {
        guard rest.count == n else { throw UsageError(message: "\(command) takes \(what)") }
    }
    switch command {
    case "add":
        try args(1, "a title")
        if try await mine.zones().contains(where: { $0.id.zoneName == zone.zoneName }) == false { _ = try await mine.createZone(zone) }
        let id = "trip-" + UUID().uuidString.lowercased().prefix(8)
        let saved = try await mine.save(Record(recordType: "Trip", recordName: String(id), zoneID: zone, fields: ["title": .string(rest[0])]))
        print("added \(saved.recordName)")
    case "list":
        guard try await mine.zones().contains(where: { $0.id.zoneName == zone.zoneName }) else {
            print("(no trips)")
            return 0
        }
        let trips = try await mine.query(Query(recordType: "Trip", sortDescriptors: [.ascending("title")]), zoneID: zone).records
        for t in trips {
            let guid = try? await mine.share(for: shareID(t.recordName, in: zone)).shortGUID
            print("\(t.recordName)\t\(text(t["title"]))\(guid.map { "\tshared \($0)" } ?? "")")
        }
        if trips.isEmpty { print("(no trips)") }
    case "share":
        try args(2, "a trip ID and a user")
        let share = try await mine.share(
            root: RecordID(recordName: rest[0], zoneID: zone),
            participants: [Share.Participant(userRecordName: rest[1], permission: o.has("--write") ? .readWrite : .readOnly)])
        print("shared \(rest[0]) with \(rest[1]): \(share.shortGUID ?? "")")
    case "unshare":
        try args(1, "a trip ID")
        try await mine.deleteShare(shareID(rest[0], in: zone))
        print("stopped sharing \(rest[0])")
    case "accept":
        try args(1, "a short GUID")
        let m = try await pub.acceptShare(shortGUID: rest[0])
        print("joined \(m.share.rootRecordName ?? m.share.id.zoneID.zoneName) of \(m.share.owner) (\(m.callerParticipant?.permission.rawValue ?? "?"))")
    case "shared":
        var any = false
        for z in try await shared.zones() {
            let records = try await shared.query(Query(recordType: "Trip", sortDescriptors: [.ascending("title")]), zoneID: z.id).records
            for t in records {
                any = true
                let days = try await shared.query(Query(recordType: "Day", sortDescriptors: [.ascending("plan")]), zoneID: z.id).records
                    .filter { $0.parent?.recordName == t.recordName }.map { text($0["plan"]) }
                print("\(z.id.ownerName)\t\(t.recordName)\t\(text(t["title"]))\(days.isEmpty ? "" : "\tdays: " + days.joined(separator: ", "))")
            }
        }
        if !any { print("(nothing shared with you)") }
    case "edit", "add-day":
        try args(3, "the owner, a trip ID and a text")
        let id = RecordID(recordName: rest[1], zoneID: ZoneID(zoneName: zone.zoneName, ownerName: rest[0]))
        if command == "edit" {
            var trip = try await shared.record(for: id)
            trip["title"] = .string(rest[2])
            _ = try await shared.save(trip)
            print("renamed \(rest[1])")
        } else {
            var day = Record(recordType: "Day", recordName: "day-" + UUID().uuidString.lowercased().prefix(8), zoneID: id.zoneID)
            day["plan"] = .string(rest[2])
            day.parent = id
            _ = try await shared.save(day)
            print("added a day to \(rest[1])")
        }
    case "leave":
        try args(2, "the owner and a trip ID")
        try await shared.deleteShare(shareID(rest[1], in: ZoneID(zoneName: zone.zoneName, ownerName: rest[0])))
        print("left \(rest[1])")
    default:
        throw UsageError(message: "unknown command '\(command)'")
    }
    return 0
}

await runExample(usage: usage, container: "iCloud.com.example.trips", flags: ["--write"]) { command, arguments, options, session in
    try await trips(
        command, arguments, options, mine: try session.database(.private), shared: try session.database(.shared),
        pub: try session.database(.public))
}
