import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Recovery of a whole store: torn tails open to an exact prefix of commits; corruption is reported, never served.
@Suite struct StoreRecoveryTests {
    let fm = FileManager.default

    /// Builds a store with `count` records, one commit each, and returns a crash image of it (the directory as a
    /// crash would leave it: no checkpoint, no lock holder) plus each record's frame position.
    func crashImage(_ dir: TempDir, count: Int) async throws -> (image: String, positions: [FramePosition], segment: String) {
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        for i in 0..<count { _ = try await db.save(note("n\(i)", title: String(repeating: "t", count: i * 3), count: Int64(i))) }
        let key = ZoneKey(database: db.id, zoneName: ZoneID.defaultZoneName)
        let positions = try (0..<count).map { i in try store.partitions[0].state.withLock { try $0.entry(key, "n\(i)")!.position } }
        try store.partitions[0].log.flush()
        let image = dir.sub("image")
        try fm.copyItem(atPath: dir.sub("store"), toPath: image)
        try await store.close()
        let pdir = image + "/p0000"
        for f in try fm.contentsOfDirectory(atPath: pdir) where f.hasSuffix(".ckpt") { try fm.removeItem(atPath: pdir + "/" + f) }
        try? fm.removeItem(atPath: image + "/LOCK")
        let segments = try fm.contentsOfDirectory(atPath: pdir).filter { $0.hasSuffix(".seg") }
        #expect(segments.count == 1)
        return (image, positions, pdir + "/" + segments[0])
    }

    func open(_ path: String) async throws -> CloudletStore {
        try await CloudletStore.open(at: path, configuration: StoreConfiguration(durability: .os))
    }

    @Test func truncatingTheLastSegmentAnywhereInItsLastFramesOpensToAnExactPrefix() async throws {
        let dir = TempDir("torn")
        let count = 12
        let (image, positions, segment) = try await crashImage(dir, count: count)
        let segmentName = (segment as NSString).lastPathComponent
        let first = positions[count - 3].offset
        let end = positions[count - 1].offset + UInt64(positions[count - 1].length)
        for cut in first..<end {
            let work = dir.sub("work")
            try? fm.removeItem(atPath: work)
            try fm.copyItem(atPath: image, toPath: work)
            let handle = try #require(FileHandle(forWritingAtPath: work + "/p0000/" + segmentName))
            try handle.truncate(atOffset: cut)
            try handle.close()
            let store = try await open(work)
            let db = try store.container(testContainer).privateDatabase(user: "u")
            let survivors = positions.filter { $0.offset + UInt64($0.length) <= cut }.count
            for i in 0..<count {
                let r = try? await db.record(for: RecordID(recordName: "n\(i)"))
                #expect((r != nil) == (i < survivors), "cut at \(cut): record n\(i) should \(i < survivors ? "" : "not ")exist")
                if let r { #expect(r["count"] == .int64(Int64(i))) }
            }
            // The log continues after the cut.
            _ = try await db.save(note("after"))
            try await store.close()
            let reopened = try await open(work)
            #expect(try await reopened.container(testContainer).privateDatabase(user: "u").record(for: RecordID(recordName: "after")).recordName == "after")
            try await reopened.close()
        }
    }

    @Test func aFlippedByteMidLogIsReportedWithSegmentAndOffset() async throws {
        let dir = TempDir("flip")
        let (image, positions, segment) = try await crashImage(dir, count: 10)
        let victim = positions[4]
        var bytes = try #require(fm.contents(atPath: segment))
        bytes[Int(victim.offset) + Int(victim.length) - 2] ^= 0x40
        try bytes.write(to: URL(fileURLWithPath: segment))
        let e = await expectError(.corruption) { try await open(image) }
        let segmentName = (segment as NSString).lastPathComponent
        #expect(e?.message.contains(segmentName) == true, "\(e?.message ?? "")")
        #expect(e?.message.contains("\(victim.offset)") == true, "\(e?.message ?? "")")
    }

    @Test func aFlippedByteBehindACheckpointFailsTheReadNotTheOpen() async throws {
        let dir = TempDir("flipckpt")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        for i in 0..<10 { _ = try await db.save(note("n\(i)", count: Int64(i))) }
        let key = ZoneKey(database: db.id, zoneName: ZoneID.defaultZoneName)
        let victim = try store.partitions[0].state.withLock { try $0.entry(key, "n4")!.position }
        try await store.close()
        let pdir = dir.sub("store") + "/p0000"
        let segment = pdir + "/" + (try fm.contentsOfDirectory(atPath: pdir).first { $0.hasSuffix(".seg") }!)
        var bytes = try #require(fm.contents(atPath: segment))
        bytes[Int(victim.offset) + Int(victim.length) - 2] ^= 0x40
        try bytes.write(to: URL(fileURLWithPath: segment))

        let reopened = try await openStore(dir)
        let rdb = try reopened.container(testContainer).privateDatabase(user: "u")
        let e = await expectError(.corruption) { try await rdb.record(for: RecordID(recordName: "n4")) }
        #expect(e?.message.contains("\(victim.offset)") == true, "\(e?.message ?? "")")
        #expect(try await rdb.record(for: RecordID(recordName: "n5"))["count"] == .int64(5))
        try await reopened.close()
    }
}
