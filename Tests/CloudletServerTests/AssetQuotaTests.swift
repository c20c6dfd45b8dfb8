import Cloudlet
import CloudletCore
import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

@testable import CloudletServer

/// The storage quota (`--user-quota`) counts the asset files a user's records reference, per reference: an upload
/// that would not fit is refused at upload time (`QUOTA_EXCEEDED`, nothing kept), a save whose new assets would not
/// fit is refused whole, and deleting the record gives the room back. Each test has its own server.
@Suite struct AssetQuotaTests {
    static let quota = 100_000

    func withServer(_ body: (LiveServer) async throws -> Void) async throws {
        let s = try await LiveServer.start { $0.userQuota = Self.quota }
        do { try await body(s) } catch {
            await s.shutdown()
            throw error
        }
        await s.shutdown()
    }

    /// `count` bytes that differ with `seed` (so that no two uploads share a file).
    func content(_ count: Int, seed: UInt8) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) } }

    /// An upload URL for field `image` of a Photo in alice's private database (or `user`'s).
    func uploadURL(_ s: LiveServer, as user: String = "alice") async throws -> String {
        let r = try await HTTP.post(
            s.url("assets/upload", as: user), #"{"tokens":[{"recordType":"Photo","fieldName":"image"}]}"#)
        return try #require(r.json["tokens"]?.arrayValue?.first?["url"]?.stringValue, "\(r)")
    }

    func savePhoto(_ s: LiveServer, _ name: String, _ fields: String, as user: String = "alice") async throws -> Reply {
        try await HTTP.post(
            s.url("records/modify", as: user),
            #"{"operations":[{"operationType":"create","record":{"recordName":"\#(name)","recordType":"Photo","fields":{\#(fields)}}}]}"#)
    }

    func metric(_ s: LiveServer, _ name: String) async throws -> Double? {
        let r = try await HTTP.send("GET", s.server.url + "/cloudlet/metrics", headers: HTTP.bearer(s.adminToken))
        return r.text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last!) }
    }

    @Test func anUploadThatWouldPassTheQuotaIsRefusedAtUploadTimeAndKeepsNothing() async throws {
        try await withServer { s in
            let first = try await uploadAsset(s, content(60_000, seed: 1), field: "image")
            let saved = try await savePhoto(s, "p1", #""image":{"value":\#(first.json),"type":"ASSETID"}"#)
            #expect(saved.status == 200 && saved.records.first?["serverErrorCode"] == nil, "\(saved)")
            let filesBefore = try await s.store.assetStatistics().files
            // 60,000 bytes saved: another 60,000 do not fit in alice's 100,000 (Content-Length known: refused unread).
            let url = try await uploadURL(s)
            let over = try await HTTP.send("POST", url, body: content(60_000, seed: 2))
            #expect(over.status == 413 && over.serverErrorCode == "QUOTA_EXCEEDED", "\(over)")
            #expect(over.reason.contains("100000-byte quota") && over.reason.contains("nothing was kept"), "\(over)")
            #expect(try await s.store.assetStatistics().files == filesBefore)
            #expect(try await metric(s, "cloudlet_quota_exceeded_total") == 1)
            // The same without a declared length (chunked): cut off once it passes what is left.
            let dir = TempDir("asset-quota")
            let file = dir.sub("body")
            try Data(content(60_000, seed: 3)).write(to: URL(fileURLWithPath: file))
            let chunked = try await ChildProcess.run(
                "/usr/bin/curl", ["-sS", "-H", "Transfer-Encoding: chunked", "--data-binary", "@" + file, "-w", "\n%{http_code}", url])
            let text = chunked.out.joined(separator: "\n")
            #expect(text.hasSuffix("413") && text.contains("QUOTA_EXCEEDED"), "\(chunked)")
            #expect(try await s.store.assetStatistics().files == filesBefore)
            let tmp = s.store.assets.directory + "/tmp"
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).isEmpty)
            // A small one still fits; bob's quota is his own.
            #expect(try await HTTP.send("POST", try await uploadURL(s), body: content(10_000, seed: 4)).status == 200)
            #expect(try await HTTP.send("POST", try await uploadURL(s, as: "bob"), body: content(60_000, seed: 5)).status == 200)
            // Deleting the photo gives its bytes back.
            let deleted = try await HTTP.post(
                s.url("records/modify"), #"{"operations":[{"operationType":"forceDelete","record":{"recordName":"p1"}}]}"#)
            #expect(deleted.records.first?["deleted"]?.boolValue == true, "\(deleted)")
            #expect(try await HTTP.send("POST", try await uploadURL(s), body: content(60_000, seed: 2)).status == 200)
        }
    }

    @Test func aSaveWhoseNewAssetsWouldPassTheQuotaIsRefusedWholeAndASaveBackIsNot() async throws {
        try await withServer { s in
            // Two uploads of 45,000 bytes each fit on their own (uploads count once saved) …
            let a = try await uploadAsset(s, content(45_000, seed: 1), field: "image")
            let b = try await uploadAsset(s, content(45_000, seed: 2), field: "thumb")
            let small = try await uploadAsset(s, content(5_000, seed: 3), field: "image")
            #expect(try await savePhoto(s, "first", #""image":{"value":\#(a.json),"type":"ASSETID"}"#).records.first?["recordChangeTag"] != nil)
            // … but a record bringing another 45,000 (with 5,000 more in a second record) passes the 100,000 bytes:
            // the whole request is refused.
            let over = try await HTTP.post(
                s.url("records/modify"),
                #"{"operations":[{"operationType":"create","record":{"recordName":"second","recordType":"Photo","fields":{"thumb":{"value":\#(b.json),"type":"ASSETID"}}}},{"operationType":"create","record":{"recordName":"third","recordType":"Photo","fields":{"image":{"value":\#(small.json),"type":"ASSETID"}}}},{"operationType":"create","record":{"recordName":"fourth","recordType":"Photo","fields":{"image":{"value":\#(small.json),"type":"ASSETID"}}}}]}"#)
            #expect(over.status == 413 && over.serverErrorCode == "QUOTA_EXCEEDED", "\(over)")
            #expect(over.reason.contains("records and assets"), "\(over)")
            let lookup = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"second"},{"recordName":"third"}]}"#)
            #expect(lookup.records.map { $0["serverErrorCode"]?.stringValue } == ["NOT_FOUND", "NOT_FOUND"], "\(lookup)")
            // Each reference counts: the 5,000-byte file twice is 10,000, which still fits beside 45,000.
            let twice = try await HTTP.post(
                s.url("records/modify"),
                #"{"operations":[{"operationType":"create","record":{"recordName":"third","recordType":"Photo","fields":{"image":{"value":\#(small.json),"type":"ASSETID"}}}},{"operationType":"create","record":{"recordName":"fourth","recordType":"Photo","fields":{"image":{"value":\#(small.json),"type":"ASSETID"}}}}]}"#)
            #expect(twice.status == 200 && twice.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(twice)")
            let usedNow = try await s.store.container(LiveServer.container).privateDatabase(user: s.alice.user.userRecordName).assetBytesUsed()
            #expect(usedNow == 55_000)
            // A record fetched and saved back (its asset without a receipt) brings no new bytes: it goes through near
            // the quota, where the same file with a receipt again would not.
            let fetched = try await HTTP.post(s.url("records/lookup"), #"{"records":[{"recordName":"first"}]}"#)
            let tag = try #require(fetched.records.first?["recordChangeTag"]?.stringValue, "\(fetched)")
            var w = JSONWriter()
            w.value(try #require(fetched.records.first?["fields"]?["image"]?["value"]))
            let kept = String(decoding: w.bytes, as: UTF8.self)
            let saveBack = try await HTTP.post(
                s.url("records/modify"),
                #"{"operations":[{"operationType":"update","record":{"recordName":"first","recordType":"Photo","recordChangeTag":"\#(tag)","fields":{"image":{"value":\#(kept),"type":"ASSETID"},"title":{"value":"beach"}}}}]}"#)
            #expect(saveBack.status == 200 && saveBack.records.first?["serverErrorCode"] == nil, "\(saveBack)")
        }
    }
}
