import CloudletCore
import CloudletMaintenance
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Store files are the owner's alone: created 0600 (directories 0700), and `cloudlet-tool verify` warns about
/// anything looser.
@Suite struct StorePermissionsTests {
    let dir = TempDir("modes")

    func mode(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test func everyFileAndDirectoryOfAStoreIsTheOwnersAlone() async throws {
        let store = try await openStore(dir)
        _ = try await store.container(testContainer).privateDatabase(user: "alice").save(note("n"))
        try await store.checkpoint()
        try await store.close()
        let root = dir.sub("store")
        var checked = 0
        for relative in try #require(FileManager.default.enumerator(atPath: root)).compactMap({ $0 as? String }) {
            let path = root + "/" + relative
            var isDir: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDir)
            let m = try mode(path)
            #expect(m == (isDir.boolValue ? 0o700 : 0o600), "\(relative): \(String(m, radix: 8))")
            checked += 1
        }
        #expect(try mode(root) == 0o700)
        #expect(checked > 3)
        #expect(try StoreInspector(path: root).verify(deep: false).findings.filter { $0.message.contains("mode") }.isEmpty)
    }

    @Test func verifyWarnsAboutLooserModesNamingTheFile() async throws {
        let store = try await openStore(dir)
        _ = try await store.container(testContainer).privateDatabase(user: "alice").save(note("n"))
        try await store.close()
        let root = dir.sub("store")
        let file = try #require(FileManager.default.enumerator(atPath: root)?.compactMap { $0 as? String }.first { $0.hasSuffix(".seg") })
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: root + "/" + file)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root)
        let report = try StoreInspector(path: root).verify(deep: false)
        let warnings = report.findings.filter { $0.message.contains("mode") }
        #expect(warnings.count == 2, "\(warnings)")
        #expect(warnings.allSatisfy { $0.severity == .warning })
        #expect(warnings.contains { $0.file == root + "/" + file && $0.message.contains("0644") && $0.message.contains("chmod 600") })
        #expect(warnings.contains { $0.file == root && $0.message.contains("0755") && $0.message.contains("chmod 700") })
        #expect(report.isClean)  // a warning, not an error
    }
}
