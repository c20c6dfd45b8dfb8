import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

/// Assets through `cloudlet serve` as a child process: an upload cut off by SIGKILL leaves nothing behind once the
/// store is opened again, and the next upload of the same file works.
@Suite(.serialized) struct AssetServeTests {
    @Test func anUploadKilledMidwayLeavesNoPartialFile() async throws {
        let dir = TempDir("asset-serve")
        let data = dir.sub("data")
        var serve = try await ServeChild.start(data: data, extra: ["--durability", "os"])
        let api = try #require(serve.apiToken)
        let web = try #require(serve.webAuthToken)
        func uploadURL(_ base: String) async throws -> String {
            let r = try await HTTP.post(
                "\(base)/database/1/iCloud.com.example.app/development/private/assets/upload?ckAPIToken=\(api)&ckWebAuthToken=\(web)",
                #"{"tokens":[{"recordType":"Photo","fieldName":"image"}]}"#)
            return try #require(r.json["tokens"]?.arrayValue?.first?["url"]?.stringValue, "\(r)")
        }
        let content = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let url = try await uploadURL(serve.url)
        let connection = try BlockingHTTPConnection(serve.url)
        try connection.startPost(String(url.dropFirst(serve.url.count)), declaredLength: content.count, prefix: Array(content.prefix(300_000)))
        let tmp = data + "/assets/tmp"
        let deadline = Date().addingTimeInterval(10)
        while ((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).isEmpty && Date() < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(!((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).isEmpty, "the upload never reached the disk")
        await serve.child.stop(SIGKILL)

        serve = try await ServeChild.start(data: data, extra: ["--durability", "os"])
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).isEmpty)
        // The 256 shard directories are made before the first write; none may hold a file.
        let root = data + "/assets/sha256"
        let named = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).flatMap {
            (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + $0)) ?? []
        }
        #expect(named.isEmpty, "a partial upload got a name: \(named)")
        let again = try await HTTP.send("POST", try await uploadURL(serve.url), body: content)
        #expect(again.status == 200, "\(again)")
        #expect(again.json["singleFile"]?["size"]?.int64Value == Int64(content.count))
        await serve.child.stop(SIGTERM)
    }

    @Test func theMaxAssetSizeOptionSetsTheLimitA413Names() async throws {
        let dir = TempDir("asset-serve")
        let serve = try await ServeChild.start(data: dir.sub("data"), extra: ["--durability", "os", "--max-asset-size", "2000000"])
        let (api, web) = (try #require(serve.apiToken), try #require(serve.webAuthToken))
        let r = try await HTTP.post(
            "\(serve.url)/database/1/iCloud.com.example.app/development/private/assets/upload?ckAPIToken=\(api)&ckWebAuthToken=\(web)",
            #"{"tokens":[{"recordType":"Photo","fieldName":"image"}]}"#)
        let url = try #require(r.json["tokens"]?.arrayValue?.first?["url"]?.stringValue, "\(r)")
        let big = try await HTTP.send("POST", url, body: [UInt8](repeating: 1, count: 2_000_001))
        #expect(big.status == 413)
        #expect(big.reason.contains("2000000 bytes (--max-asset-size)"), "\(big)")
        let fits = try await HTTP.send("POST", url, body: [UInt8](repeating: 1, count: 2_000_000))
        #expect(fits.status == 200, "\(fits)")
        await serve.child.stop(SIGTERM)
    }

    @Test func uploadsPastTheConcurrencyLimitAreAskedToRetry() async throws {
        let s = try await LiveServer.start { $0.maxConcurrentUploads = 1 }
        var refused: Reply?
        do {
            let held = try await uploadURL(s)
            var connection: BlockingHTTPConnection? = try BlockingHTTPConnection(s.server.url)
            try connection?.startPost(String(held.dropFirst(s.server.url.count)), declaredLength: 1000, prefix: [1, 2, 3])
            // The first upload is being received (its body is not complete); a second one is refused for now.
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                let r = try await HTTP.send("POST", try await uploadURL(s), body: [9])
                if r.status == 503 {
                    refused = r
                    break
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            connection = nil  // closes it: the held upload ends, so the server can stop
            _ = connection
        } catch {
            await s.shutdown()
            throw error
        }
        await s.shutdown()
        #expect(refused?.serverErrorCode == "TRY_AGAIN_LATER", "\(String(describing: refused))")
    }

    private func uploadURL(_ s: LiveServer) async throws -> String {
        let r = try await HTTP.post(
            s.url("assets/upload"), #"{"tokens":[{"recordType":"Photo","fieldName":"image"}]}"#)
        return try #require(r.json["tokens"]?.arrayValue?.first?["url"]?.stringValue, "\(r)")
    }
}
