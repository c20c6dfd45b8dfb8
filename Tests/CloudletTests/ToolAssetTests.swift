import CloudletCore
import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

@testable import Cloudlet

/// `cloudlet-tool verify`, `stats`, `info` and `gc` on a store with assets.
@Suite struct ToolAssetTests {
    /// A stopped store with two photos (one in a list field) and one deleted photo; returns the kept checksums and
    /// the deleted one's.
    private func build(_ path: String) async throws -> (kept: [String], deleted: String) {
        let store = try await CloudletStore.open(at: path, configuration: toolStoreConfig())
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let a = try await db.save(Record(recordType: "Photo", recordName: "a", fields: ["image": .asset(AssetReference(data: [1, 2, 3]))]))
        var b = Record(recordType: "Album", recordName: "b")
        b["pages"] = .list(.asset, [.asset(AssetReference(data: [4, 5]))])
        b = try await db.save(b)
        let gone = try await db.save(Record(recordType: "Photo", recordName: "gone", fields: ["image": .asset(AssetReference(data: [6]))]))
        _ = try await db.modify([.forceDelete(gone.id)])
        try await store.close()
        return ([a["image"]!.assets[0].fileChecksum, b["pages"]!.assets[0].fileChecksum], gone["image"]!.assets[0].fileChecksum)
    }

    @Test func verifyFindsAMissingAssetAndDeepVerifyADamagedOne() async throws {
        let dir = TempDir()
        let path = dir.sub("store")
        let (kept, _) = try await build(path)
        let ok = try await tool("verify", "--data", path)
        #expect(ok.code == 0, "\(ok)")
        #expect(ok.stdout.contains("2 reference(s) to 2 file(s) checked"), "\(ok)")

        let blob = path + "/assets/sha256/\(kept[1].prefix(2))/\(kept[1])"
        try Data([9, 9]).write(to: URL(fileURLWithPath: blob))  // same size, other bytes
        #expect(try await tool("verify", "--data", path).code == 0)  // not hashed without --deep
        let deep = try await tool("verify", "--data", path, "--deep")
        #expect(deep.code == 65, "\(deep)")
        #expect(deep.stdout.contains("record 'b', field 'pages'") && deep.stdout.contains("do not hash"), "\(deep)")

        try FileManager.default.removeItem(atPath: path + "/assets/sha256/\(kept[0].prefix(2))/\(kept[0])")
        let missing = try await tool("verify", "--data", path, "--json")
        #expect(missing.code == 65)
        let json = try missing.json()
        #expect(json["ok"] == .bool(false))
        #expect(json["assets"]?["missing"]?.arrayValue?.first?["field"]?.stringValue == "image", "\(missing)")
    }

    @Test func statsAndInfoCountTheFilesAndGcDeletesTheUnreferencedOne() async throws {
        let dir = TempDir()
        let path = dir.sub("store")
        let (kept, deleted) = try await build(path)
        let info = try await tool("info", "--data", path, "--json")
        #expect(try info.json()["assets"]?["files"]?.int64Value == 3, "\(info)")
        let stats = try await tool("stats", "--data", path, "--json")
        let assets = try stats.json()["assets"]
        #expect(assets?["referenced"]?.int64Value == 2, "\(stats)")
        #expect(assets?["unreferenced"]?.int64Value == 1, "\(stats)")

        // Within the grace window nothing goes; with none, the deleted photo's file does.
        let young = try await tool("gc", "--data", path, "--json")
        #expect(try young.json()["deletedFiles"]?.int64Value == 0, "\(young)")
        let dry = try await tool("gc", "--data", path, "--grace", "0", "--dry-run")
        #expect(dry.code == 0 && dry.stdout.contains("up to 1 unreferenced"), "\(dry)")
        let gc = try await tool("gc", "--data", path, "--grace", "0", "--json")
        #expect(try gc.json()["deletedFiles"]?.int64Value == 1, "\(gc)")
        #expect(!FileManager.default.fileExists(atPath: path + "/assets/sha256/\(deleted.prefix(2))/\(deleted)"))
        for c in kept { #expect(FileManager.default.fileExists(atPath: path + "/assets/sha256/\(c.prefix(2))/\(c)")) }
        #expect(try await tool("verify", "--data", path, "--deep").code == 0)
    }

    @Test func exportAndImportCarryTheAssetFilesWithAssets() async throws {
        let dir = TempDir()
        let path = dir.sub("store")
        let (kept, deleted) = try await build(path)
        let lines = dir.sub("export.jsonl")
        let e = try await tool("export", "--data", path, "--output", lines, "--assets", dir.sub("files"))
        #expect(e.code == 0 && e.stderr.contains("copied 2 asset file(s)"), "\(e)")
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: dir.sub("files"))) == Set(kept))  // not the deleted one's
        _ = deleted

        let bare = try await tool("import", "--data", dir.sub("bare"), "--input", lines)
        #expect(bare.code == 0 && bare.stderr.contains("reference 2 asset file(s) this store lacks"), "\(bare)")
        #expect(try await tool("verify", "--data", dir.sub("bare")).code == 65)

        let copy = try await tool("import", "--data", dir.sub("copy"), "--input", lines, "--assets", dir.sub("files"))
        #expect(copy.code == 0 && copy.stderr.contains("2 asset file(s)"), "\(copy)")
        #expect(try await tool("verify", "--data", dir.sub("copy"), "--deep").code == 0)

        // A file that does not hash to its name is bad data.
        try Data([0]).write(to: URL(fileURLWithPath: dir.sub("files") + "/" + kept[0]))
        let bad = try await tool("import", "--data", dir.sub("bad"), "--input", lines, "--assets", dir.sub("files"))
        #expect(bad.code == 65 && bad.stderr.contains("does not hash to its name"), "\(bad)")
    }
}
