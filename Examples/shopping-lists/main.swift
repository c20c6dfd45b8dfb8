import CloudletCommandLine
import ExampleSupport
import Foundation

// Shopping Lists: lists in a custom zone of the private database, sorted by name; items reference their list with
// DELETE_SELF, so deleting a list deletes its items in the same commit.

let usage = """
    USAGE: shopping-lists <command> [options]

    COMMANDS:
      lists                       every list, by name, with how many items it has
      add-list NAME               a new list
      add-item LIST ITEM [--quantity N]
      items LIST                  the list's items, by name: name, quantity, done
      check LIST ITEM             marks an item done
      rename-item LIST ITEM NEW
      remove-item LIST ITEM
      delete-list LIST            the list and (by DELETE_SELF) its items

    \(ExampleSession.help(container: "iCloud.com.example.shopping"))
    """

let zone = ZoneID(zoneName: "Lists")

func listID(_ name: String) -> RecordID { RecordID(recordName: "list-" + name, zoneID: zone) }
func itemID(_ list: String, _ item: String) -> RecordID { RecordID(recordName: "item-\(list)-\(item)", zoneID: zone) }

func items(of list: String, _ db: any CloudletDatabase) async throws -> [Record] {
    let q = Query(
        recordType: "Item",
        predicate: .comparison(Comparison("list", .equals, .reference(Reference(recordName: listID(list).recordName)))),
        sortDescriptors: [.ascending("name")])
    return try await db.query(q, zoneID: zone).records
}

func shopping(_ command: String, _ rest: [String], _ o: CommandLineOptions, _ db: any CloudletDatabase) async throws -> Int32 {
    func args(_ n: Int, _ what: String) throws {
        guard rest.count == n else { throw UsageError(message: "\(command) takes \(what)") }
    }
    if (try? await db.zone(for: zone)) == nil { _ = try await db.createZone(zone) }
    switch command {
    case "lists":
        try args(0, "no arguments")
        let lists = try await db.query(Query(recordType: "List", sortDescriptors: [.ascending("name")]), zoneID: zone).records
        for l in lists {
            let name = text(l["name"])
            print("\(name)\t\(try await items(of: name, db).count) items")
        }
        if lists.isEmpty { print("(no lists)") }
    case "add-list":
        try args(1, "the list's name")
        var l = Record(recordType: "List", id: listID(rest[0]))
        l["name"] = .string(rest[0])
        _ = try await db.modify([.create(l)])[0].record ?? { throw CloudletError(.recordExists, "list '\(rest[0])' exists") }()
        print("added list \(rest[0])")
    case "add-item":
        try args(2, "a list and an item")
        _ = try await db.record(for: listID(rest[0]))
        var item = Record(recordType: "Item", id: itemID(rest[0], rest[1]))
        item["name"] = .string(rest[1])
        item["quantity"] = .int64(Int64(try o.integer("--quantity", in: 1...1_000_000) ?? 1))
        item["done"] = .int64(0)
        item["list"] = .reference(Reference(recordName: listID(rest[0]).recordName, action: .deleteSelf))
        try await db.save(item, policy: .allKeys)
        print("added \(rest[1]) to \(rest[0])")
    case "items":
        try args(1, "a list")
        _ = try await db.record(for: listID(rest[0]))
        let found = try await items(of: rest[0], db)
        for i in found { print("\(text(i["name"]))\t\(text(i["quantity"]))\t\(i["done"] == .int64(1) ? "done" : "")") }
        if found.isEmpty { print("(no items)") }
    case "check", "rename-item":
        try args(command == "check" ? 2 : 3, command == "check" ? "a list and an item" : "a list, an item and its new name")
        var item = try await db.record(for: itemID(rest[0], rest[1]))
        if command == "check" {
            item["done"] = .int64(1)
            try await db.save(item)
            print("checked \(rest[1])")
        } else {
            // A record's name is its identity: renaming makes a new record and deletes the old one, atomically
            // (the custom zone is atomic).
            var renamed = Record(recordType: "Item", id: itemID(rest[0], rest[2]), fields: item.fields)
            renamed["name"] = .string(rest[2])
            let results = try await db.modify([.create(renamed), .delete(item.id, changeTag: item.changeTag ?? "")], atomic: true)
            if let e = results.compactMap(\.error).first { throw e }
            print("renamed \(rest[1]) to \(rest[2])")
        }
    case "remove-item":
        try args(2, "a list and an item")
        try await db.deleteRecord(itemID(rest[0], rest[1]))
        print("removed \(rest[1])")
    case "delete-list":
        try args(1, "a list")
        let count = try await items(of: rest[0], db).count
        try await db.deleteRecord(listID(rest[0]))
        print("deleted list \(rest[0]) and its \(count) items")
    default:
        throw UsageError(message: "unknown command '\(command)'")
    }
    return 0
}

await runExample(usage: usage, container: "iCloud.com.example.shopping", valued: ["--quantity"]) { command, arguments, options, session in
    try await shopping(command, arguments, options, try session.database(.private))
}
