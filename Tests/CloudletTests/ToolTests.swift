import CloudletCore
import CloudletMaintenance
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// `cloudlet-tool` run as a process on stores the tests build.
@Suite(.serialized) struct ToolTests {
    let zone = sampleZone

    @Test func helpUsageAndErrorsFollowTheConventions() async throws {
        let top = try await tool("--help")
        #expect(top.code == 0 && top.stdout.contains("verify") && top.stdout.contains("EXIT CODES"), "\(top)")
        for command in ["info", "verify", "dump", "changes", "stats", "hash", "export", "import", "compact", "repair", "generate"] {
            let r = try await tool(command, "--help")
            #expect(r.code == 0 && r.stdout.hasPrefix("USAGE: cloudlet-tool \(command)") && r.stderr.isEmpty, "\(command): \(r)")
        }
        let unknown = try await tool("frobnicate")
        #expect(unknown.code == 64 && unknown.stderr.hasPrefix("error: unknown command") && unknown.stdout.isEmpty)
        let noData = try await tool("info")
        #expect(noData.code == 64 && noData.stderr.contains("--data DIR is required"))
        let badOption = try await tool("verify", "--data", "/tmp", "--bogus")
        #expect(badOption.code == 64 && badOption.stderr.contains("unknown option --bogus"))
        let dir = TempDir("tool-nostore")
        let missing = try await tool("info", "--data", dir.path)
        #expect(missing.code == 74 && missing.stderr.contains("no Cloudlet store"), "\(missing)")
    }

    @Test func infoStatsAndHashInTextAndJSON() async throws {
        let dir = TempDir("tool-info")
        let path = dir.sub("store")
        try await buildSample(path)
        let info = try await tool("info", "--data", path)
        #expect(info.code == 0, "\(info)")
        #expect(info.stdout.contains("1 partition(s)") && info.stdout.contains("Work          19 record(s)  1 tombstone(s)"), "\(info)")
        #expect(info.stdout.contains("checkpoint checkpoint-") && info.stdout.contains("used"))
        let j = try await tool("info", "--data", path, "--json").json()
        let p0 = try #require(j["partitions"]?.arrayValue?.first)
        #expect(p0["lastLSN"]?.int64Value ?? 0 > 10)
        #expect((p0["segments"]?.arrayValue?.count ?? 0) > 2)
        let zones = try #require(j["zones"]?.arrayValue)
        #expect(zones.map { $0["zone"]?.stringValue ?? "" }.sorted() == ["Work", "_defaultZone", "_defaultZone"])
        #expect(zones.first { $0["zone"]?.stringValue == "Work" }?["records"]?.int64Value == 19)

        let stats = try await tool("stats", "--data", path)
        #expect(stats.code == 0 && stats.stdout.contains("compaction would read"), "\(stats)")
        let sj = try await tool("stats", "--data", path, "--json").json()
        let sp = try #require(sj["partitions"]?.arrayValue?.first)
        #expect(sp["deadBytes"]?.int64Value ?? 0 > 0)
        #expect(sp["keyDirectoryEntries"]?.int64Value == 36)
        #expect(sp["compaction"]?["framesDropped"]?.int64Value ?? 0 > 0)

        let hash = try await tool("hash", "--data", path)
        #expect(hash.code == 0 && hash.lines.first?.hasPrefix("store ") == true, "\(hash)")
        let hj = try await tool("hash", "--data", path, "--json").json()
        #expect(hj["store"]?.stringValue == (try contentHash(path)))
        #expect(hj["records"]?.int64Value == 35)
        #expect(hj["databases"]?.arrayValue?.count == 2)
        let zoneOnly = try await tool("hash", "--data", path, "--zone", "Work", "--json").json()
        #expect(zoneOnly["zones"]?.arrayValue?.count == 1)
    }

    @Test func dumpAndChangesMatchTheEngine() async throws {
        let dir = TempDir("tool-dump")
        let path = dir.sub("store")
        try await buildSample(path)
        let records = try await tool("dump", "--data", path, "--zone", "Work", "--json").jsonLines()
        #expect(records.count == 19)
        #expect(records.allSatisfy { $0["fields"]?["count"]?["value"]?.int64Value == 2 && $0["kind"]?.stringValue == "record" })
        let withTombstones = try await tool("dump", "--data", path, "--zone", "Work", "--tombstones", "--json").jsonLines()
        #expect(withTombstones.filter { $0["kind"]?.stringValue == "tombstone" }.map { $0["recordName"]?.stringValue } == ["w3"])
        let text = try await tool("dump", "--data", path, "--type", "Post")
        #expect(text.lines.count == 1 && text.stdout.contains("p1 Post") && text.stdout.contains("body: \"hello\""), "\(text)")
        let log = try await tool("dump", "--data", path, "--log", "--zone", "Work", "--tombstones", "--json").jsonLines()
        #expect(log.filter { $0["kind"]?.stringValue == "put" }.count == 60)
        #expect(log.filter { $0["kind"]?.stringValue == "put" && $0["live"]?.boolValue == true }.count == 19)
        #expect(log.contains { $0["kind"]?.stringValue == "delete" && $0["recordName"]?.stringValue == "w3" })
        let frames = try await tool("dump", "--data", path, "--frames", "--from-lsn", "2", "--to-lsn", "4", "--json").jsonLines()
        #expect(frames.map { $0["lsn"]?.int64Value } == [2, 3, 4])

        // changes: the engine's feed, from scratch and from a token.
        let store = try await CloudletStore.open(at: path, configuration: toolStoreConfig())
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let all = try await db.zoneChanges(zone)
        let firstPage = try await db.zoneChanges(zone, resultsLimit: 5)
        try await store.close()
        let fromScratch = try await tool("changes", "--data", path, "--container", testContainer, "--owner", "alice", "--zone", "Work", "--json")
        let lines = try fromScratch.jsonLines()
        #expect(lines.dropLast().map { $0["recordName"]?.stringValue ?? "" } == all.changes.map(\.recordID.recordName), "\(fromScratch)")
        #expect(lines.last?["token"]?.stringValue == all.token.base64)
        let since = try await tool(
            "changes", "--data", path, "--container", testContainer, "--owner", "alice", "--zone", "Work", "--since",
            firstPage.token.base64)
        #expect(since.lines.dropLast().map { String($0.split(separator: " ")[1]) } == all.changes.dropFirst(5).map(\.recordID.recordName), "\(since)")
        #expect(since.lines.last?.hasPrefix("token \(all.token.base64)") == true)
        let bad = try await tool(
            "changes", "--data", path, "--container", testContainer, "--owner", "alice", "--zone", "Work", "--since", "bm90IGEgdG9rZW4=")
        #expect(bad.code == 65 && bad.stderr.contains("malformed"), "\(bad)")
    }

    /// A store whose sealed segment is damaged in three ways: each is reported with its partition, segment and
    /// offset, and verify exits 65.
    @Test func verifyNamesAFlippedByteATruncatedAndADeletedSegment() async throws {
        let dir = TempDir("tool-verify")
        let path = dir.sub("store")
        try await buildSample(path)
        let clean = try await tool("verify", "--data", path, "--deep")
        #expect(clean.code == 0 && clean.stdout.hasPrefix("ok:"), "\(clean)")
        let segments = try segmentFiles(path)
        #expect(segments.count >= 3)
        // A sealed segment with at least two frames, and where its second frame is, from the tool itself.
        let frames = try await tool("dump", "--data", path, "--frames", "--json").jsonLines()
        let victim = try #require(
            segments.dropLast().first { name in frames.filter { $0["segment"]?.stringValue == name }.count >= 2 })
        let second = try #require(frames.filter { $0["segment"]?.stringValue == victim }[1]["offset"]?.int64Value)

        func copy(_ name: String) throws -> String {
            let p = dir.sub(name)
            try FileManager.default.copyItem(atPath: path, toPath: p)
            return p
        }
        // A flipped byte inside the second frame.
        let flipped = try copy("flipped")
        let handle = try #require(FileHandle(forUpdatingAtPath: flipped + "/p0000/" + victim))
        try handle.seek(toOffset: UInt64(second) + 40)
        let byte = handle.readData(ofLength: 1)
        try handle.seek(toOffset: UInt64(second) + 40)
        handle.write(Data([byte[0] ^ 0x55]))
        try handle.close()
        let f = try await tool("verify", "--data", flipped)
        #expect(f.code == 65, "\(f)")
        #expect(f.stdout.contains("error: partition 0, segment \(victim), offset \(second): checksum mismatch"), "\(f)")
        let fj = try await tool("verify", "--data", flipped, "--json").json()
        let finding = try #require(fj["findings"]?.arrayValue?.first)
        #expect(finding["file"]?.stringValue == victim && finding["offset"]?.int64Value == second && fj["ok"]?.boolValue == false)

        // A segment cut in the middle of its second frame.
        let truncated = try copy("truncated")
        let th = try #require(FileHandle(forWritingAtPath: truncated + "/p0000/" + victim))
        try th.truncate(atOffset: UInt64(second) + 10)
        try th.close()
        let t = try await tool("verify", "--data", truncated)
        #expect(t.code == 65, "\(t)")
        #expect(t.stdout.contains("error: partition 0, segment \(victim), offset \(second): "), "\(t)")

        // A deleted segment.
        let deleted = try copy("deleted")
        try FileManager.default.removeItem(atPath: deleted + "/p0000/" + victim)
        let d = try await tool("verify", "--data", deleted)
        #expect(d.code == 65, "\(d)")
        #expect(d.stdout.contains("error: partition 0, segment \(victim), offset 0: LSNs"), "\(d)")
        #expect(d.stdout.contains("was deleted or lost"))
    }

    @Test func repairCutsATornTailAndDropsOnlyWhatItIsTold() async throws {
        let dir = TempDir("tool-repair")
        let path = dir.sub("store")
        try await buildSample(path)
        let last = try #require(try segmentFiles(path).last)
        let lastPath = path + "/p0000/" + last
        let size = try #require(try FileManager.default.attributesOfItem(atPath: lastPath)[.size] as? UInt64)
        // A torn tail: the last segment loses its last 7 bytes — after the index was flushed past them, so the log
        // now ends before what the index covers: an open refuses it, repair sets the index aside and rebuilds it.
        let h = try #require(FileHandle(forWritingAtPath: lastPath))
        try h.truncate(atOffset: size - 7)
        try h.close()
        let v = try await tool("verify", "--data", path)
        #expect(v.code == 65 && v.stdout.contains("warning: partition 0, segment \(last)") && v.stdout.contains("torn tail"), "\(v)")
        #expect(v.stdout.contains("error: partition 0, index manifest index/MANIFEST-"), "\(v)")
        #expect(v.stdout.contains("but the log ends at LSN") && v.stdout.contains("until `cloudlet-tool repair` rebuilds the index"))
        let r = try await tool("repair", "--data", path, "--backup", dir.sub("backup"))
        #expect(r.code == 0 && r.stdout.contains("cut the torn tail of \(last)"), "\(r)")
        #expect(FileManager.default.fileExists(atPath: dir.sub("backup") + "/p0000/" + last))
        let after = try await tool("verify", "--data", path, "--deep")
        #expect(after.code == 0 && !after.stdout.contains("warning:"), "\(after)")

        // Mid-log corruption: refused until the suggested range is given.
        let victim = try segmentFiles(path)[1]
        let recordsBefore = try await tool("dump", "--data", path, "--log", "--json").lines.count
        try xorByte(path + "/p0000/" + victim, at: 200)
        let refused = try await tool("repair", "--data", path)
        #expect(refused.code == 65 && refused.stdout.contains("not repairing"), "\(refused)")
        let refusedJSON = try await tool("repair", "--data", path, "--json").json()
        #expect(refusedJSON["ok"]?.boolValue == false && refusedJSON["refused"]?.arrayValue?.first?["file"]?.stringValue == victim)
        let suggestion = try #require(refused.lines.last?.trimmingCharacters(in: .whitespaces))
        #expect(suggestion.hasPrefix("--drop-range \(victim):"))
        let dropped = try await tool(["repair", "--data", path, "--backup", dir.sub("backup2")] + suggestion.split(separator: " ").map(String.init))
        #expect(dropped.code == 0 && dropped.stdout.contains("lost"), "\(dropped)")
        let final = try await tool("verify", "--data", path, "--deep")
        #expect(final.code == 0, "\(final)")
        #expect(try await tool("dump", "--data", path, "--log", "--json").lines.count < recordsBefore)
        #expect(FileManager.default.fileExists(atPath: dir.sub("backup2") + "/p0000/" + victim))
    }

    @Test func aStoreOpenForWritingIsRefusedEvenForReading() async throws {
        let dir = TempDir("tool-lock")
        let path = dir.sub("store")
        try await buildSample(path, passes: 1)
        let store = try await CloudletStore.open(at: path, configuration: toolStoreConfig())
        for args in [["info"], ["verify"], ["compact"], ["dump"]] {
            let r = try await tool(args + ["--data", path])
            #expect(r.code == 1 && r.stderr.contains("by another process (pid \(getpid()))"), "\(args): \(r)")
        }
        try await store.close()
        #expect(try await tool("info", "--data", path).code == 0)
    }

    @Test func exportImportRoundTripsEveryFieldType() async throws {
        let dir = TempDir("tool-export")
        let path = dir.sub("store")
        let store = try await CloudletStore.open(at: path, configuration: toolStoreConfig())
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        try await db.createZone(zone)
        try await db.createZone(ZoneID(zoneName: "Empty"))
        var r = Record(recordType: "Everything", recordName: "all", zoneID: zone)
        r["string"] = .string("quote \" backslash \\ newline \n tab \t nul \u{0} emoji 🦆 é")
        r["int"] = .int64(.min)
        r["intMax"] = .int64(.max)
        r["double"] = .double(0.1)
        r["tiny"] = .double(.leastNonzeroMagnitude)
        r["negZero"] = .double(-0.0)
        r["inf"] = .double(-.infinity)
        r["bytes"] = .bytes([0, 1, 2, 253, 254, 255])
        r["time"] = .timestamp(-1_234_567)
        r["place"] = .location(Location(latitude: 47.3, longitude: -122.1, horizontalAccuracy: 5, altitude: 12.5, timestamp: 42))
        r["bare"] = .location(Location(latitude: 0, longitude: 0))
        r["ref"] = .reference(Reference(recordName: "other", action: .deleteSelf))
        r["asset"] = .asset(AssetReference(data: Array(repeating: 1, count: 99)))
        r["strings"] = .list(.string, ["a", "", "ü"])
        r["empty"] = .list(.int64, [])
        r["doubles"] = .list(.double, [1.5, .double(.nan), 1e300])
        r["refs"] = .list(.reference, [.reference(Reference(recordName: "other", action: .validate)), .reference(Reference(recordName: "y"))])
        r["places"] = .list(.location, [.location(Location(latitude: 1, longitude: 2, speed: 3, course: 4))])
        r["assets"] = .list(.asset, [.asset(AssetReference(data: []))])
        r["times"] = .list(.timestamp, [.timestamp(0), .timestamp(.max)])
        r["blobs"] = .list(.bytes, [.bytes([]), .bytes([9])])
        _ = try await db.save(Record(recordType: "Other", recordName: "other", zoneID: zone))
        let saved = try await db.save(r)
        _ = try await db.save(note("plain"))
        try await store.close()

        let export = dir.sub("export.jsonl")
        let e = try await tool("export", "--data", path, "--output", export)
        #expect(e.code == 0 && e.stderr.contains("exported 3 record(s) and 2 custom zone(s)"), "\(e)")
        let i = try await tool("import", "--data", dir.sub("copy"), "--input", export)
        #expect(i.code == 0 && i.stderr.contains("imported 3 record(s), 2 zone(s)"), "\(i)")
        #expect(try contentHash(path, ignoreChangeTags: true) == (try contentHash(dir.sub("copy"), ignoreChangeTags: true)))

        let copy = try await CloudletStore.open(at: dir.sub("copy"), configuration: toolStoreConfig())
        let cdb = try copy.container(testContainer).privateDatabase(user: "alice")
        let back = try await cdb.record(for: saved.id)
        #expect(back.fields.count == saved.fields.count)
        for (k, v) in saved.fields {
            // Bit for bit, NaN included.
            #expect(RecordCodec.encode(Record(recordType: "T", recordName: "n", fields: [k: back.fields[k]!]))
                == RecordCodec.encode(Record(recordType: "T", recordName: "n", fields: [k: v])), "field \(k)")
        }
        #expect(back.created == saved.created && back.modified == saved.modified)
        #expect(back.changeTag != nil, "an imported record gets a change tag of the store it is in")
        #expect(try await cdb.zones().map(\.id.zoneName) == ["_defaultZone", "Empty", "Work"])
        try await copy.close()

        let badLine = dir.sub("bad.jsonl")
        try Data("{\"kind\":\"record\",\"container\":\"\(testContainer)\",\"zone\":\"_defaultZone\",\"recordName\":\"x\",\"recordType\":\"T\",\"fields\":{\"f\":{\"type\":\"INT64\",\"value\":\"nope\"}}}\n".utf8).write(to: URL(fileURLWithPath: badLine))
        let bad = try await tool("import", "--data", dir.sub("copy"), "--input", badLine)
        #expect(bad.code == 65 && bad.stderr.contains("line 1: field 'f'"), "\(bad)")
    }
}
