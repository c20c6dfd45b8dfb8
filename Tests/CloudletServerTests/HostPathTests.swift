@testable import Cloudlet
import CloudletConcurrency
import CloudletCore
import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

@testable import CloudletServer

/// An error answered to a client names the server's files relative to the store, never by their host path
/// (issue 19).
@Suite struct HostPathTests {
    /// A record whose frame has a flipped byte in a stopped store (behind the checkpoint, so the store opens), looked
    /// up over HTTP: `INTERNAL_ERROR` naming the partition, segment and offset, never a host path.
    @Test func aLookupThatMeetsACorruptFrameNamesTheSegmentRelativeToTheStore() async throws {
        let dir = TempDir("host-path")
        let path = dir.sub("store")
        let marker = "Q1=" + UUID().uuidString.prefix(8)
        var store = try await CloudletStore.open(at: path, configuration: StoreConfiguration(durability: .os))
        let credentials = Credentials(store: store)
        let apiToken = try await credentials.createAPIToken(container: LiveServer.container)
        let alice = try await credentials.createUser(name: "alice")
        var config = ServerConfiguration()
        config.port = 0
        config.log = nil
        var server = try Server(store: store, configuration: config)
        try server.start()
        func url(_ op: String) -> String {
            "\(server.url)/database/1/\(LiveServer.container)/development/private/records/\(op)"
                + "?ckAPIToken=\(apiToken)&ckWebAuthToken=\(alice.webAuthToken)"
        }
        let saved = try await HTTP.post(
            url("modify"),
            #"{"operations":[\#(createOp("victim", fields: #""title":{"value":"\#(marker)"}"#))]}"#)
        #expect(saved.records.count == 1 && saved.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(saved)")
        server.stop()
        try await store.close()

        /// Flips a byte of the one place `text` is in a file of the store whose name ends with `suffix`; that file.
        func flip(_ text: String, inFileEndingWith suffix: String) throws -> String {
            let files = FileManager.default.enumerator(atPath: path)!.compactMap { $0 as? String }.filter { $0.hasSuffix(suffix) }
            var hits: [(file: String, offset: Int)] = []
            for file in files {
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + "/" + file)))
                let needle = Array(text.utf8)
                for i in 0..<max(0, bytes.count - needle.count)
                where bytes[i] == needle[0] && Array(bytes[i..<i + needle.count]) == needle {
                    hits.append((file, i))
                }
            }
            let hit = try #require(hits.first, "\(text) is in no \(suffix) file of \(files)")
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + "/" + hit.file)))
            bytes[hit.offset + 5] ^= 0x40
            try Data(bytes).write(to: URL(fileURLWithPath: path + "/" + hit.file))
            return hit.file
        }
        let segment = try flip(marker, inFileEndingWith: ".seg")

        store = try await CloudletStore.open(at: path, configuration: StoreConfiguration(durability: .os))
        server = try Server(store: store, configuration: config)
        try server.start()
        try await withCleanup({
            server.stop()
            try? await store.close()
        }) {
            // p0000/00000000000000000001.seg: partition 0, segment 1.
            let parts = segment.split(separator: "/")
            let (partition, number) = (Int(parts[0].dropFirst())!, Int(parts[1].prefix { $0 != "." })!)
            for place in ["partition \(partition): record 'victim' points at", "of segment \(number) offset "] {
                let found = try await HTTP.post(url("lookup"), #"{"records":[{"recordName":"victim"}]}"#)
                let error = found.records.first?["serverErrorCode"] != nil ? found.records.first! : found.json
                #expect(error["serverErrorCode"]?.stringValue == "INTERNAL_ERROR", "\(found)")
                let reason = error["reason"]?.stringValue ?? ""
                #expect(reason.contains(place), "\(reason)")
                #expect(!found.text.contains(dir.path) && !reason.contains(" /") && !reason.contains("'/"), "a host path: \(reason)")
            }
        }
    }

    /// Every way an engine error reaches a client (a whole answer, a per-record error) names an open store's files
    /// relative to it: the segment, sorted run, asset and manifest messages the engine writes with host paths.
    @Test func anEngineErrorNamingAStoreFileIsAnsweredRelativeToTheStore() async throws {
        let dir = TempDir("host-path-edge")
        let store = try await CloudletStore.open(at: dir.sub("store"), configuration: StoreConfiguration(durability: .os))
        await withCleanup({ try? await store.close() }) {
            let root = store.path
            for (error, told) in [
                (CloudletError(.corruption, "segment \(root)/p0001/00000000000000000003.seg offset 4096: checksum mismatch"),
                 "segment p0001/00000000000000000003.seg offset 4096: checksum mismatch"),
                (CloudletError(.corruption, "sorted run \(root)/p0000/index/00000000000000000007.run offset 16: bad block"),
                 "sorted run p0000/index/00000000000000000007.run offset 16: bad block"),
                (CloudletError(.io, "opening asset file \(root)/assets/ab/abcdef: No such file"), "opening asset file assets/ab/abcdef: No such file"),
            ] {
                #expect(APIError(error).reason == told)
                #expect(APIError(answering: error).reason == told)
                var w = JSONWriter()
                RecordCoding.writeError(error, recordName: "r", to: &w, numbersAsStrings: false)
                #expect(String(decoding: w.bytes, as: UTF8.self).contains(#""reason":"\#(told)""#), "\(String(decoding: w.bytes, as: UTF8.self))")
            }
            struct Foreign: Error, CustomStringConvertible { var description: String }
            #expect(APIError(answering: Foreign(description: "open \(root)/catalog/x failed")).reason == "open catalog/x failed")
        }
        // Closed: the store's directory is no longer known, and its paths are still not shown.
        #expect(APIError(CloudletError(.io, "reading \(store.path)/p0000/1.seg")).reason == "reading …/1.seg")
    }

    @Test(arguments: [
        // (registered store, message, what a client is told)
        ("/srv/cl/store", "segment /srv/cl/store/p0001/0001.seg offset 42: checksum mismatch",
         "segment p0001/0001.seg offset 42: checksum mismatch"),
        ("/srv/cl/store", "sorted run '/srv/cl/store/p0000/idx/7.run' offset 0: short", "sorted run 'p0000/idx/7.run' offset 0: short"),
        ("/srv/cl/store", "store /srv/cl/store is locked", "store the store directory is locked"),
        ("/srv/cl/store", "cannot read /etc/cloudlet/key.pem: denied", "cannot read …/key.pem: denied"),
        ("/srv/cl/store", "fetch http://node-2:8080/cloudlet/cluster/blob failed", "fetch http://node-2:8080/cloudlet/cluster/blob failed"),
        ("/srv/cl/store", "/srv/cl/store2/x.seg is not ours", "…/x.seg is not ours"),
        ("/srv/cl/store", "a/b and c are fine", "a/b and c are fine"),
    ])
    func aMessageIsRewrittenForAClient(_ root: String, _ message: String, _ told: String) {
        HostPaths.register(store: root)
        defer { HostPaths.unregister(store: root) }
        #expect(HostPaths.redact(message) == told)
    }

    @Test func aClosedStoresDirectoryIsNoLongerKnownButStillNotShown() {
        HostPaths.register(store: "/srv/closed/store")
        HostPaths.unregister(store: "/srv/closed/store")
        #expect(HostPaths.redact("segment /srv/closed/store/p0001/1.seg offset 1") == "segment …/1.seg offset 1")
    }
}
