import CloudletCore
import CloudletMaintenance
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Records stored as blocks of their own (commit payload version 2, store format 3): read in place, checked on their
/// own, and stores written before them still read and upgraded.
@Suite struct RecordBlockTests {
    let zone = ZoneID(zoneName: "Blocks")

    /// A record whose encoding LZ4 shrinks (a long repeated text) or not (a short one).
    func item(_ name: String, compressible: Bool = true, value: Int64 = 0) -> Record {
        let text = compressible ? String(repeating: "the same words again ", count: 20) : "short"
        return Record(recordType: "Item", recordName: name, zoneID: zone, fields: ["text": .string(text), "v": .int64(value)])
    }

    func key(_ db: Database) throws -> ZoneKey { try db.key(zone) }

    func entry(_ store: CloudletStore, _ key: ZoneKey, _ name: String) -> RecordEntry? {
        try? store.partition(for: key).state.withLock { try $0.entry(key, name) }
    }

    @Test func blocksRoundTripCompressedOrStoredAsTheyAre() throws {
        var random = SplitMix64(seed: 7)
        let cases: [(bytes: [UInt8], compressed: Bool)] = [
            (Array("tiny".utf8), false),  // under the threshold
            (Array(String(repeating: "abcd", count: 100).utf8), true),
            ((0..<400).map { _ in UInt8(truncatingIfNeeded: random.next()) }, false),  // incompressible
        ]
        for (bytes, compressed) in cases {
            var w = ByteWriter()
            w.u8(0xEE)  // a block sits inside a payload
            let range = RecordBlock.append(bytes, to: &w)
            #expect(range.upperBound == w.count)
            #expect((w.bytes[range.lowerBound] & RecordBlock.lz4Flag != 0) == compressed)
            if compressed { #expect(range.count < bytes.count) }
            #expect(try RecordBlock.unwrap(w.bytes, range) == bytes)
        }
    }

    @Test func everyDamagedByteOfABlockIsCaught() throws {
        for bytes in [Array(String(repeating: "abcd", count: 100).utf8), Array("a short record".utf8)] {
            var w = ByteWriter()
            let range = RecordBlock.append(bytes, to: &w)
            for i in range {
                for mask: UInt8 in [0x01, 0x80, 0xFF] {
                    var damaged = w.bytes
                    damaged[i] ^= mask
                    #expect(throws: CloudletError.self, "byte \(i) ^ \(mask)") { try RecordBlock.unwrap(damaged, range) }
                }
            }
        }
    }

    @Test func aPointReadFetchesTheRecordsBytesNotItsCommit() async throws {
        let dir = TempDir("block-point-read")
        var store = try await openStore(dir)
        var db = try store.container(testContainer).privateDatabase(user: "u")
        try await db.createZone(zone)
        _ = try await db.modify((0..<200).map { .create(item("r\($0)", value: Int64($0))) })
        try await store.close()

        store = try await openStore(dir)  // nothing cached
        db = try store.container(testContainer).privateDatabase(user: "u")
        let key = try key(db)
        let log = store.partition(for: key).log
        let e = try #require(entry(store, key, "r123"))
        #expect(e.slot.block && e.slot.recordLength > e.slot.length, "a compressed block: \(e.slot)")
        let cache = store.partition(for: key).cache
        let before = log.bytesRead
        let countsBefore = cache.counts
        #expect(try await db.record(for: RecordID(recordName: "r123", zoneID: zone))["v"] == .int64(123))
        #expect(log.bytesRead - before == UInt64(e.slot.length), "one read of the block's \(e.slot.length) bytes")
        #expect(cache.counts.misses == countsBefore.misses + 1 && cache.counts.hits == countsBefore.hits, "one miss, counted once")
        #expect(UInt64(e.slot.length) * 100 < UInt64(e.position.length), "the commit's frame is \(e.position.length) bytes")

        // A lookup of many: the blocks of one commit come with one read, none of them twice.
        let ids = (0..<200).filter { $0 != 123 }.map { RecordID(recordName: "r\($0)", zoneID: zone) }
        let lookupStart = log.bytesRead
        let missesBefore = cache.counts.misses
        let found = try await db.records(for: ids)
        #expect(cache.counts.misses == missesBefore + ids.count, "each miss counted once")
        #expect(found.count == ids.count)
        for (id, r) in zip(ids, found) { #expect(try r.get().recordName == id.recordName) }
        #expect(log.bytesRead - lookupStart <= UInt64(e.position.length), "at most the frame's bytes")
        // Read a second time they are admitted to the cache (a one-off read is not: RecordCache's doorkeeper)…
        let secondStart = log.bytesRead
        _ = try await db.records(for: ids)
        #expect(log.bytesRead > secondStart)
        // …so the third read is served from memory.
        let cachedStart = log.bytesRead
        _ = try await db.records(for: ids)
        #expect(log.bytesRead == cachedStart)
        try await store.close()
    }

    @Test func aDamagedRecordIsAnErrorNotAnotherRecordAndVerifyNamesIt() async throws {
        let dir = TempDir("block-damage")
        var config = StoreConfiguration(durability: .os)
        config.segmentSize = 16 << 10
        var store = try await CloudletStore.open(at: dir.sub("store"), configuration: config)
        var db = try store.container(testContainer).privateDatabase(user: "u")
        try await db.createZone(zone)
        for batch in 0..<20 {
            _ = try await db.modify((0..<10).map { .create(item("b\(batch)-\($0)", value: Int64($0))) })
        }
        let key = try key(db)
        let victim = try #require(entry(store, key, "b0-5"))
        let lastSegment = store.partition(for: key).log.endPosition.segment
        #expect(victim.position.segment < lastSegment, "the damage goes to a sealed segment")
        try await store.close()

        let segment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: dir.sub("store") + "/p0000").first {
                $0.hasSuffix(".seg") && UInt64($0.prefix(20)) == victim.position.segment
            })
        let file = try #require(FileHandle(forUpdatingAtPath: dir.sub("store") + "/p0000/" + segment))
        let at = victim.position.payloadOffset + UInt64(victim.slot.offset) + UInt64(victim.slot.length / 2)
        try file.seek(toOffset: at)
        let byte = try #require(try file.read(upToCount: 1)?.first)
        try file.seek(toOffset: at)
        try file.write(contentsOf: [byte ^ 0x5A])
        try file.close()

        store = try await CloudletStore.open(at: dir.sub("store"), configuration: config)
        db = try store.container(testContainer).privateDatabase(user: "u")
        let error = await expectError(.corruption) { try await db.record(for: RecordID(recordName: "b0-5", zoneID: zone)) }
        #expect(error?.message.contains("record 'b0-5'") == true, "\(String(describing: error))")
        #expect(try await db.record(for: RecordID(recordName: "b0-4", zoneID: zone))["v"] == .int64(4))
        let lookup = try await db.records(for: ["b0-4", "b0-5", "b0-6"].map { RecordID(recordName: $0, zoneID: zone) })
        #expect(try lookup[0].get()["v"] == .int64(4))
        #expect(throws: CloudletError.self) { try lookup[1].get() }
        if case .failure(let e) = lookup[1] { #expect(e.code == .corruption) }
        #expect(try lookup[2].get()["v"] == .int64(6))
        try await store.close()

        let report = try StoreInspector(path: dir.sub("store")).verify(deep: true)
        #expect(!report.isClean && report.findings.contains { $0.file.hasSuffix(segment) }, "\(report.findings)")
    }

    @Test func aFormat2StoreOpensAsFormat3ReadsBothVersionsAndCompactionConvertsIt() async throws {
        let dir = TempDir("block-upgrade")
        var old = StoreConfiguration(durability: .os)
        old.commitPayloadVersion = 1
        old.compaction = .manual
        var store = try await CloudletStore.open(at: dir.sub("store"), configuration: old)
        var db = try store.container(testContainer).privateDatabase(user: "u")
        try await db.createZone(zone)
        _ = try await db.modify((0..<50).map { .create(item("old\($0)", compressible: $0 % 2 == 0, value: Int64($0))) })
        try await store.close()
        // What a release before format 3 left: version-1 commits, `CLOUDLET` saying 2.
        let metadataPath = dir.sub("store") + "/" + StoreMetadata.fileName
        var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: metadataPath))) as? [String: Any])
        json["format"] = 2
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: metadataPath))

        var config = StoreConfiguration(durability: .os)
        config.compaction = .manual
        store = try await CloudletStore.open(at: dir.sub("store"), configuration: config)
        #expect(store.metadata.format == StoreMetadata.currentFormat)
        let onDisk = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: metadataPath))) as? [String: Any]
        #expect(onDisk?["format"] as? Int == StoreMetadata.currentFormat)
        db = try store.container(testContainer).privateDatabase(user: "u")
        let key = try key(db)
        #expect(entry(store, key, "old7")?.slot.block == false)
        for i in 0..<50 {
            #expect(try await db.record(for: RecordID(recordName: "old\(i)", zoneID: zone))["v"] == .int64(Int64(i)))
        }
        // New commits are blocks; an update reads the version-1 record and writes a block.
        _ = try await db.modify((0..<10).map { .create(item("new\($0)", value: Int64(100 + $0))) })
        var updated = try await db.record(for: RecordID(recordName: "old3", zoneID: zone))
        updated["v"] = .int64(333)
        _ = try await db.save(updated)
        let old9 = try await db.record(for: RecordID(recordName: "old9", zoneID: zone))
        _ = try await db.modify([.delete(old9.id, changeTag: old9.changeTag!)])
        #expect(entry(store, key, "new1")?.slot.block == true && entry(store, key, "old3")?.slot.block == true)
        let all = (0..<50).filter { $0 != 9 }.map { "old\($0)" } + (0..<10).map { "new\($0)" }
        func values() async throws -> [String: FieldValue?] {
            let found = try await db.records(for: all.map { RecordID(recordName: $0, zoneID: zone) })
            return Dictionary(uniqueKeysWithValues: try zip(all, found).map { ($0, try $1.get()["v"]) })
        }
        let before = try await values()
        #expect(before["old3"] == .int64(333) && before["old4"] == .int64(4) && before["new2"] == .int64(102))

        // The version-1 commit lost two records: compaction rewrites it, its records as blocks.
        try await store.compact(includeActiveSegment: true)
        #expect(try await values() == before)
        for name in all { #expect(entry(store, key, name)?.slot.block == true, "\(name)") }
        try await store.close()
        store = try await CloudletStore.open(at: dir.sub("store"), configuration: config)
        db = try store.container(testContainer).privateDatabase(user: "u")
        #expect(try await values() == before)
        try await store.close()
        let report = try StoreInspector(path: dir.sub("store")).verify(deep: true)
        #expect(report.isClean && report.findings.isEmpty, "\(report.findings)")
    }

    @Test func changeTagChecksAndDeletesComeFromTheKeyDirectory() async throws {
        let dir = TempDir("block-no-read")
        var store = try await openStore(dir)
        var db = try store.container(testContainer).privateDatabase(user: "u")
        try await db.createZone(zone)
        let saved = try await db.modify((0..<3).map { .create(item("k\($0)")) }).map { try #require($0.record) }
        try await store.close()
        store = try await openStore(dir)
        db = try store.container(testContainer).privateDatabase(user: "u")
        let log = store.partition(for: try key(db)).log
        let start = log.bytesRead
        // A delete with the right tag, a forced delete, a create over an existing name needing no server record…
        let results = try await db.modify([
            .delete(saved[0].id, changeTag: saved[0].changeTag!), .forceDelete(saved[1].id),
        ])
        #expect(results.allSatisfy { $0.error == nil })
        #expect(log.bytesRead == start, "no record was read")
        // …while a stale tag reads the record, to send it back.
        let stale = try await db.modify([.delete(saved[2].id, changeTag: "stale")])
        #expect(stale[0].code == .serverRecordChanged && stale[0].error?.serverRecord?.recordName == "k2")
        #expect(log.bytesRead > start)
        try await store.close()
    }

    @Test func pageBudgetsCountARecordsDecodedLengthNotItsCompressedBlock() async throws {
        let dir = TempDir("block-budget")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        try await db.createZone(zone)
        let saved = try await db.save(item("big"))
        let e = try #require(entry(store, try key(db), "big"))
        #expect(e.slot.length < e.slot.recordLength)
        #expect(e.pageCost("big") == RecordCodec.encode(saved).count)
        try await store.close()
    }
}

@Suite("Change tags")
struct ChangeTagTests {
    @Test("matches(_:lsn:index:) accepts exactly the tag make(lsn:index:) writes")
    func matchesIsMake() {
        var random = SplitMix64(seed: 11)
        for n in 0..<2000 {
            let lsn = n < 3 ? UInt64(n) : (n % 2 == 0 ? random.next() : random.next() % 100_000)
            let index = n % 3 == 0 ? 0 : Int(random.next() % 300)
            let tag = ChangeTag.make(lsn: lsn, index: index)
            #expect(ChangeTag.matches(tag, lsn: lsn, index: index), "\(tag)")
            #expect(!ChangeTag.matches(tag, lsn: lsn &+ 1, index: index), "\(tag)")
            #expect(!ChangeTag.matches(tag, lsn: lsn, index: index + 1), "\(tag)")
            #expect(!ChangeTag.matches(tag + "0", lsn: lsn, index: index), "\(tag)")
        }
        for bad in ["", "-", "a-", "-a", "0-0", "5-0", "05", "5-05", "A", "5_1", "5-1-1", "zzzzzzzzzzzzzzzz", " 5"] {
            for lsn: UInt64 in [0, 5] {
                for index in [0, 1] { #expect(!ChangeTag.matches(bad, lsn: lsn, index: index) || bad == ChangeTag.make(lsn: lsn, index: index), "\(bad)") }
            }
        }
    }
}
