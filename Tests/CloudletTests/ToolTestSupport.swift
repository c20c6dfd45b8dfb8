import CloudletConcurrency
import CloudletMaintenance
import CloudletWire
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// The built `cloudlet-tool` executable, next to the test bundle.
func toolExecutable() throws -> String { try builtExecutable("cloudlet-tool") }

/// What a run of the tool printed and how it exited.
struct ToolRun: CustomStringConvertible {
    var code: Int32
    var stdout: String
    var stderr: String

    var lines: [String] { stdout.split(separator: "\n").map(String.init) }
    /// stdout as one JSON document.
    func json() throws -> JSONValue { try JSONValue.parse(stdout.trimmingCharacters(in: .whitespacesAndNewlines)) }
    /// stdout as JSON lines.
    func jsonLines() throws -> [JSONValue] { try lines.map { try JSONValue.parse($0) } }
    var description: String { "exit \(code)\nstdout:\n\(stdout.prefix(4000))\nstderr:\n\(stderr.prefix(4000))" }
}

/// Runs `cloudlet-tool` with `args` to completion (no terminal: no progress bar), waiting outside the cooperative
/// pool (see `ChildProcess.waitForExit()`).
func tool(_ args: String...) async throws -> ToolRun { try await tool(args) }

func tool(_ args: [String]) async throws -> ToolRun {
    try await ThreadBridge.offload { try runTool(args) }
}

private func runTool(_ args: [String]) throws -> ToolRun {
    let r = try SpawnedProcess.run(try toolExecutable(), args)
    return ToolRun(code: r.status, stdout: String(decoding: r.stdout, as: UTF8.self), stderr: String(decoding: r.stderr, as: UTF8.self))
}

/// A store configuration for tool tests: small segments, OS durability, no background compaction.
func toolStoreConfig(segmentSize: Int = 16 << 10) -> StoreConfiguration {
    var c = StoreConfiguration(durability: .os)
    c.segmentSize = segmentSize
    c.compaction = .manual
    return c
}

/// The custom zone of ``buildSample(_:passes:)``.
let sampleZone = ZoneID(zoneName: "Work")

/// A store for tool tests: two databases; a custom zone ("Work", 20 records written `passes` times, one deleted);
/// the default zone (5 new records a pass); a public record; small segments. With 3 passes: 35 records, 1
/// tombstone.
func buildSample(_ path: String, passes: Int = 3) async throws {
    let store = try await CloudletStore.open(at: path, configuration: toolStoreConfig(segmentSize: 4 << 10))
    let db = try store.container(testContainer).privateDatabase(user: "alice")
    try await db.createZone(sampleZone)
    var rng = SeededRandom(seed: 7)
    for pass in 0..<passes {
        var ops: [RecordOperation] = []
        for i in 0..<20 {
            var r = note("w\(i)", zone: sampleZone, title: "pass \(pass)", count: Int64(pass))
            r["blob"] = .bytes((0..<120).map { _ in UInt8.random(in: 0...255, using: &rng) })
            ops.append(.forceReplace(r))
        }
        _ = try await db.modify(ops)
        for i in 0..<5 { _ = try await db.save(note("d\(i)-p\(pass)", title: "default")) }
    }
    try await db.deleteRecord(RecordID(recordName: "w3", zoneID: sampleZone))
    let pub = try store.container(testContainer).publicDatabase()
    _ = try await pub.save(Record(recordType: "Post", recordName: "p1", fields: ["body": "hello"]))
    try await store.close()
}

/// The content hash of the store at `path`, computed in-process (as `cloudlet-tool hash` does).
func contentHash(_ path: String, ignoreChangeTags: Bool = false) throws -> String {
    let inspector = try StoreInspector(path: path)
    let store = try inspector.openStore()
    defer { try? store.closeNow() }
    var options = HashOptions()
    options.ignoreChangeTags = ignoreChangeTags
    return try inspector.hash(store: store, filter: InspectionFilter(), options: options).store
}

/// The total size of the files under `path`.
func directorySize(_ path: String) throws -> UInt64 {
    var total: UInt64 = 0
    let e = FileManager.default.enumerator(atPath: path)!
    while let f = e.nextObject() as? String {
        let attrs = try FileManager.default.attributesOfItem(atPath: path + "/" + f)
        if attrs[.type] as? FileAttributeType == .typeRegular { total += (attrs[.size] as? UInt64) ?? 0 }
    }
    return total
}

/// The segment files of partition 0, sorted.
func segmentFiles(_ store: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: store + "/p0000").filter { $0.hasSuffix(".seg") }.sorted()
}

/// Flips the bits of one byte of a file in place.
func xorByte(_ path: String, at offset: UInt64, with mask: UInt8 = 0xFF) throws {
    let h = try #require(FileHandle(forUpdatingAtPath: path))
    defer { try? h.close() }
    try h.seek(toOffset: offset)
    let byte = h.readData(ofLength: 1)
    try h.seek(toOffset: offset)
    h.write(Data([byte[0] ^ mask]))
}
