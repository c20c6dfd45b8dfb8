import CloudletWire
import Cloudlet
import CloudletCommandLine
import CloudletCore
import Foundation

/// `cloudlet demo`: a guided tour of the embedded engine on a real store directory.
enum Demo {
    static let help = """
        USAGE: cloudlet demo [--data DIR]

        Opens (or creates) the store at DIR (default ./cloudlet-data), then creates a zone, saves, queries, updates
        and fetches records, shows a change-tag conflict, an atomic batch failing as a whole and a DELETE_SELF
        cascade, and prints the store's counters. Safe to run again: it reuses what is there.
        """

    static func run(_ args: [String]) async throws {
        let o = try CommandLineOptions(args, valued: ["--data"], positional: true, help: help)
        let dir = o["--data"] ?? "./cloudlet-data"
        let started = Date()
        let store = try await CloudletStore.open(at: dir)
        say("opened store \(dir) (id \(store.metadata.storeID), \(store.metadata.partitions) partition(s)) in \(ms(since: started)) ms")
        let container = try store.container("iCloud.com.example.demo")
        let db = try container.privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "Lists")
        try await db.createZone(zone)
        say("zones of alice: \(try await db.zones().map(\.id.zoneName).joined(separator: ", "))")

        let run = Int(Date().timeIntervalSince1970)
        var list = Record(recordType: "List", recordName: "groceries-\(run)", zoneID: zone)
        list["name"] = "Groceries"
        list["created"] = .date(Date())
        list = try await db.save(list)
        say("saved \(list.recordName) with change tag \(list.changeTag!)")

        var items: [RecordOperation] = []
        for (i, item) in ["milk", "eggs", "coffee"].enumerated() {
            var r = Record(recordType: "Item", recordName: "item-\(run)-\(i)", zoneID: zone)
            r["title"] = .string(item)
            r["list"] = .reference(Reference(recordName: list.recordName, action: .deleteSelf))
            items.append(.create(r))
        }
        let saved = try await db.modify(items)
        say("atomic batch saved \(saved.filter { $0.error == nil }.count) items referencing the list (DELETE_SELF)")

        let found = try await db.query(
            try Query(recordType: "Item", format: "title BEGINSWITH %@ OR title == %@", "c", "MILK", sortDescriptors: [.ascending("title")]),
            zoneID: zone)
        say("query \"title BEGINSWITH 'c' OR title == 'MILK'\": \(found.records.map { $0["title"]?.stringValue ?? "?" }) "
            + "(\(found.plan.zones[0].access); \(found.plan.notes.first ?? "indexes ready"))")

        var renamed = list
        renamed["name"] = "Weekly groceries"
        renamed = try await db.save(renamed)
        say("updated the list: change tag \(list.changeTag!) → \(renamed.changeTag!)")
        do {
            _ = try await db.save(list)  // the stale copy
        } catch let e as CloudletError where e.code == .serverRecordChanged {
            say("saving the stale copy fails: \(e.code.serverErrorCode) — \(e.message); server has name = \(e.serverRecord?["name"]?.stringValue ?? "?")")
        }

        let dup = Record(recordType: "Item", recordName: "item-\(run)-0", zoneID: zone)
        let batch = try await db.modify([.create(Record(recordType: "Item", recordName: "item-\(run)-new", zoneID: zone)), .create(dup)])
        say("atomic batch with one duplicate: \(batch.map { $0.error?.code.serverErrorCode ?? "OK" }.joined(separator: ", "))")

        try await db.deleteRecord(list.id)
        let gone = try await db.records(for: (0..<3).map { RecordID(recordName: "item-\(run)-\($0)", zoneID: zone) })
        say("deleted the list; its items: \(gone.map { (try? $0.get()) == nil ? "gone" : "still there" }.joined(separator: ", "))")

        let s = store.statistics
        say("store: \(s.records) records in \(s.zones) zones, \(s.commits) commits, \(s.fsyncs) fsyncs, \(s.bytesWritten) bytes of log")
        try await store.close()
        say("closed (checkpoint written, lock released)")
    }

    static func say(_ s: String) { print("• " + s) }
    static func ms(since d: Date) -> Int { Int(Date().timeIntervalSince(d) * 1000) }
}
