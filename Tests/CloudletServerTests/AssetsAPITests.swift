import Cloudlet
import CloudletCore
import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

@testable import CloudletServer

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Assets over the Web Services: `assets/upload`, the upload URL, receipts in `records/modify`, download URLs in
/// lookups, queries and change feeds, `GET` of a download URL with ranges, the size limit, and the lifetime of the
/// files (garbage collection after deletion). Each test has its own server (a 32 MB asset limit).
@Suite struct AssetsAPITests {
    static let maxAssetSize: Int64 = 32 << 20

    /// A response with its headers.
    struct Full {
        var status: Int
        var body: [UInt8]
        var headers: [String: String]
        var reply: Reply { Reply(status: status, body: body) }
    }

    static func send(_ method: String, _ url: String, body: [UInt8]? = nil, headers: [String: String] = [:]) async throws -> Full {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.timeoutInterval = 120
        for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
        if let body { request.httpBody = Data(body) }
        let (data, response) = try await HTTP.session.data(for: request)
        let http = response as! HTTPURLResponse
        var h: [String: String] = [:]
        for (k, v) in http.allHeaderFields { h[String(describing: k).lowercased()] = String(describing: v) }
        return Full(status: http.statusCode, body: Array(data), headers: h)
    }

    private func withServer(maxAssetSize: Int64 = Self.maxAssetSize, _ body: (LiveServer) async throws -> Void) async throws {
        let s = try await LiveServer.start { $0.maxAssetSize = maxAssetSize }
        do { try await body(s) } catch {
            await s.shutdown()
            throw error
        }
        await s.shutdown()
    }

    /// `count` seeded random bytes (eight per draw: 100 MB in a debug build in about a second).
    private func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var g = SeededRandom(seed: seed)
        var words = [UInt64](repeating: 0, count: (count + 7) / 8)
        for i in words.indices { words[i] = g.next() }
        return words.withUnsafeBytes { Array($0.prefix(count)) }
    }

    /// An upload URL for `field` of a `type` record in `zone`.
    private func uploadURL(
        _ s: LiveServer, as user: String = "alice", db: String = "private", zone: String = "_defaultZone",
        type: String = "Photo", field: String = "image"
    ) async throws -> String {
        let r = try await HTTP.post(
            s.url("assets/upload", db: db, as: user),
            #"{"zoneID":{"zoneName":"\#(zone)"},"tokens":[{"recordType":"\#(type)","fieldName":"\#(field)"}]}"#)
        #expect(r.status == 200, "\(r)")
        return try #require(r.json["tokens"]?.arrayValue?.first?["url"]?.stringValue, "\(r)")
    }

    /// Uploads `content` and returns the `singleFile` dictionary's JSON text.
    private func upload(
        _ s: LiveServer, _ content: [UInt8], as user: String = "alice", db: String = "private", zone: String = "_defaultZone",
        field: String = "image"
    ) async throws -> (json: String, checksum: String, receipt: String) {
        let (json, single) = try await uploadAsset(s, content, as: user, db: db, zone: zone, field: field)
        let checksum = try #require(single["fileChecksum"]?.stringValue)
        let receipt = try #require(single["receipt"]?.stringValue)
        #expect(single["size"]?.int64Value == Int64(content.count))
        #expect(single["referenceChecksum"]?.stringValue == checksum)
        return (json, checksum, receipt)
    }

    private func savePhoto(
        _ s: LiveServer, _ name: String, assetJSON: String, as user: String = "alice", db: String = "private",
        zone: String = "_defaultZone", field: String = "image", type: String = "ASSETID"
    ) async throws -> Reply {
        try await HTTP.post(
            s.url("records/modify", db: db, as: user),
            #"{"zoneID":{"zoneName":"\#(zone)"},"operations":[{"operationType":"create","record":{"recordName":"\#(name)","recordType":"Photo","fields":{"\#(field)":{"value":\#(assetJSON),"type":"\#(type)"}}}}]}"#
        )
    }

    private func lookup(_ s: LiveServer, _ name: String, as user: String = "alice", zone: String = "_defaultZone") async throws -> Reply {
        try await HTTP.post(
            s.url("records/lookup", as: user), #"{"zoneID":{"zoneName":"\#(zone)"},"records":[{"recordName":"\#(name)"}]}"#)
    }

    private func downloadURL(_ record: JSONValue?, field: String = "image") -> String? {
        record?["fields"]?[field]?["value"]?["downloadURL"]?.stringValue?.replacingOccurrences(of: "${f}", with: "file.bin")
    }

    // MARK: - Round trips

    @Test(arguments: [1, 3_000_000, 100_000_000])
    func anUploadedFileDownloadsWithTheSameBytes(size: Int) async throws {
        try await withServer(maxAssetSize: 128 << 20) { s in
            let content = bytes(size, seed: UInt64(size))
            let up = try await upload(s, content)
            #expect(up.checksum == SHA256Stream.hex(of: content))
            let saved = try await savePhoto(s, "p", assetJSON: up.json)
            #expect(saved.records.first?["serverErrorCode"] == nil, "\(saved)")
            let fields = saved.records.first?["fields"]?["image"]
            #expect(fields?["type"]?.stringValue == "ASSETID")
            #expect(fields?["value"]?["receipt"] == nil)  // not kept once saved
            let found = try await lookup(s, "p")
            let url = try #require(downloadURL(found.records.first), "\(found)")
            let got = try await Self.send("GET", url)
            #expect(got.status == 200)
            #expect(got.body.count == content.count)
            #expect(SHA256Stream.hex(of: got.body) == up.checksum)
            #expect(got.headers["content-length"] == String(content.count))
            #expect(got.headers["etag"] == "\"\(up.checksum)\"")
        }
    }

    @Test func aListOfAssetsCarriesADownloadURLForEachInQueriesAndChanges() async throws {
        try await withServer { s in
            let zone = "Album"
            let made = try await HTTP.post(
                s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(zone)"}}}]}"#)
            #expect(made.status == 200, "\(made)")
            let a = try await upload(s, [1, 2, 3], zone: zone, field: "pages")
            let b = try await upload(s, [4, 5], zone: zone, field: "pages")
            let saved = try await savePhoto(s, "al", assetJSON: "[\(a.json),\(b.json)]", zone: zone, field: "pages", type: "ASSET_LIST")
            #expect(saved.records.first?["serverErrorCode"] == nil, "\(saved)")
            let q = try await HTTP.post(
                s.url("records/query"), #"{"zoneID":{"zoneName":"\#(zone)"},"query":{"recordType":"Photo"}}"#)
            let pages = q.records.first?["fields"]?["pages"]?["value"]?.arrayValue ?? []
            #expect(pages.count == 2)
            for (page, content) in zip(pages, [[UInt8]([1, 2, 3]), [4, 5]]) {
                let url = try #require(page["downloadURL"]?.stringValue, "\(q)")
                #expect(try await Self.send("GET", url.replacingOccurrences(of: "${f}", with: "x")).body == content)
            }
            let changes = try await HTTP.post(s.url("changes/zone"), #"{"zones":[{"zoneID":{"zoneName":"\#(zone)"}}]}"#)
            let changed = changes.json["zones"]?.arrayValue?.first?["records"]?.arrayValue?.first
            #expect(changed?["fields"]?["pages"]?["value"]?.arrayValue?.allSatisfy { $0["downloadURL"] != nil } == true, "\(changes)")
        }
    }

    @Test func identicalUploadsAreStoredOnce() async throws {
        try await withServer { s in
            let content = bytes(200_000, seed: 9)
            let first = try await upload(s, content)
            let second = try await upload(s, content)
            #expect(first.checksum == second.checksum)
            #expect(try await s.store.assetStatistics().files == 1)
        }
    }

    @Test func concurrentUploadsAllArrive() async throws {
        try await withServer { s in
            let contents = (0..<4).map { bytes(500_000 + $0, seed: UInt64(100 + $0)) }
            let checksums = try await withThrowingTaskGroup(of: String.self) { group in
                for c in contents { group.addTask { try await upload(s, c).checksum } }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(checksums == Set(contents.map { SHA256Stream.hex(of: $0) }))
            #expect(try await s.store.assetStatistics().files == 4)
        }
    }

    // MARK: - Receipts

    @Test func forgedExpiredAndMisusedReceiptsFailTheRecordNamingTheField() async throws {
        try await withServer { s in
            let up = try await upload(s, [7, 7, 7])
            func tampered(_ receipt: String) -> String {
                var chars = Array(receipt)
                chars[3] = chars[3] == "A" ? "B" : "A"
                return String(chars)
            }
            let forged = up.json.replacingOccurrences(of: up.receipt, with: tampered(up.receipt))
            let r1 = try await savePhoto(s, "forged", assetJSON: forged)
            #expect(r1.records.first?["serverErrorCode"]?.stringValue == "BAD_REQUEST", "\(r1)")
            #expect(r1.records.first?["reason"]?.stringValue?.contains("field 'image'") == true, "\(r1)")

            // A receipt past its expiry, signed with the store's own key.
            let signer = try AssetSigner(storePath: s.store.path)
            var t = AssetTicket(
                kind: .receipt, expires: AssetSigner.now() - 1000, container: LiveServer.container,
                environment: "development", database: "private", owner: "alice", user: "alice")
            t.zone = "_defaultZone"
            t.recordType = "Photo"
            t.field = "image"
            t.checksum = up.checksum
            t.size = 3
            let expired = up.json.replacingOccurrences(of: up.receipt, with: signer.sign(t))
            let r2 = try await savePhoto(s, "expired", assetJSON: expired)
            #expect(r2.records.first?["reason"]?.stringValue?.contains("expired") == true, "\(r2)")

            // Bob's receipt in Alice's record, and a receipt for another field.
            let bobs = try await upload(s, [8, 8], as: "bob")
            let r3 = try await savePhoto(s, "bobs", assetJSON: bobs.json)
            #expect(r3.records.first?["serverErrorCode"]?.stringValue == "ACCESS_DENIED", "\(r3)")
            let other = try await upload(s, [9], field: "thumbnail")
            let r4 = try await savePhoto(s, "wrong-field", assetJSON: other.json)
            #expect(r4.records.first?["reason"]?.stringValue?.contains("field 'image'") == true, "\(r4)")

            // A checksum without a receipt (someone else's file) is refused; the genuine receipt works.
            let bare = #"{"fileChecksum":"\#(up.checksum)","size":3}"#
            let r5 = try await savePhoto(s, "bare", assetJSON: bare)
            #expect(r5.records.first?["reason"]?.stringValue?.contains("no receipt") == true, "\(r5)")
            let ok = try await savePhoto(s, "ok", assetJSON: up.json)
            #expect(ok.records.first?["serverErrorCode"] == nil, "\(ok)")

            // A record fetched and saved back (its asset has no receipt any more) is accepted.
            let fetched = try await lookup(s, "ok")
            let tag = try #require(fetched.records.first?["recordChangeTag"]?.stringValue)
            let again = try await HTTP.post(
                s.url("records/modify"),
                #"{"operations":[{"operationType":"update","record":{"recordName":"ok","recordType":"Photo","recordChangeTag":"\#(tag)","fields":{"image":{"value":\#(bare)},"title":{"value":"x"}}}}]}"#
            )
            #expect(again.records.first?["serverErrorCode"] == nil, "\(again)")
            // A whole replace that keeps the file too (it does not otherwise read the version it replaces).
            let replaced = try await HTTP.post(
                s.url("records/modify"),
                #"{"operations":[{"operationType":"forceReplace","record":{"recordName":"ok","recordType":"Photo","fields":{"image":{"value":\#(bare)}}}}]}"#
            )
            #expect(replaced.records.first?["serverErrorCode"] == nil, "\(replaced)")
        }
    }

    @Test func aPrivateAssetIsNotDownloadableByAnotherUser() async throws {
        try await withServer { s in
            let up = try await upload(s, [1, 2, 3, 4])
            _ = try await savePhoto(s, "mine", assetJSON: up.json)
            // Bob cannot read the record, so he gets no download URL…
            let looked = try await lookup(s, "mine", as: "bob")
            #expect(downloadURL(looked.records.first) == nil)
            // …cannot claim the file by its checksum in a record of his own…
            let claim = try await savePhoto(s, "claim", assetJSON: #"{"fileChecksum":"\#(up.checksum)","size":4}"#, as: "bob")
            #expect(claim.records.first?["serverErrorCode"]?.stringValue == "BAD_REQUEST", "\(claim)")
            // …nor with Alice's receipt…
            let stolen = try await savePhoto(s, "stolen", assetJSON: up.json, as: "bob")
            #expect(stolen.records.first?["serverErrorCode"]?.stringValue == "ACCESS_DENIED", "\(stolen)")
            // …and a download URL of his own, edited to name Alice's file, is refused.
            let bobs = try await upload(s, [5], as: "bob")
            _ = try await savePhoto(s, "his", assetJSON: bobs.json, as: "bob")
            let his = try #require(downloadURL(try await lookup(s, "his", as: "bob").records.first))
            let token = his.components(separatedBy: "/download/")[1].components(separatedBy: "/")[0]
            let payload = String(token.split(separator: ".")[0])
            var raw = try #require(AssetSigner.unbase64url(Substring(payload)))
            let text = String(decoding: raw, as: UTF8.self).replacingOccurrences(of: bobs.checksum, with: up.checksum)
            raw = Array(text.utf8)
            let forgedURL = his.replacingOccurrences(of: payload, with: AssetSigner.base64url(raw))
            let got = try await Self.send("GET", forgedURL)
            #expect(got.status == 403)
        }
    }

    // MARK: - URLs

    @Test func tamperedAndExpiredURLsAreRefusedAndAMissingFileIsNotFound() async throws {
        try await withServer { s in
            let url = try await uploadURL(s)
            // A character of the signed payload changed (the signature's last character may carry only padding bits).
            let at = url.index(url.startIndex, offsetBy: s.server.url.count + AssetTransfer.uploadPrefix.count + 8)
            let tampered = url.replacingCharacters(in: at...at, with: url[at] == "A" ? "B" : "A")
            #expect(try await Self.send("POST", tampered, body: [1]).status == 403)

            let signer = try AssetSigner(storePath: s.store.path)
            let old = AssetTicket(
                kind: .upload, expires: AssetSigner.now() - 1, container: LiveServer.container, environment: "development",
                database: "private", owner: "alice", user: "alice")
            let expired = try await Self.send("POST", s.server.url + AssetTransfer.uploadPrefix + signer.sign(old), body: [1])
            #expect(expired.status == 403)
            #expect(expired.reply.reason.contains("expired"))

            let up = try await upload(s, [3, 3])
            _ = try await savePhoto(s, "p", assetJSON: up.json)
            let download = try #require(downloadURL(try await lookup(s, "p").records.first))
            #expect(try await Self.send("GET", download.replacingOccurrences(of: "/download/e", with: "/download/f")).status == 403)
            var oldDownload = AssetTicket(
                kind: .download, expires: AssetSigner.now() - 1, container: LiveServer.container, environment: "development",
                database: "private", owner: "alice", user: "alice")
            oldDownload.checksum = up.checksum
            oldDownload.size = 2
            #expect(try await Self.send("GET", s.server.url + AssetTransfer.downloadPrefix + signer.sign(oldDownload) + "/f").status == 403)
            // An upload URL is not a download URL.
            #expect(try await Self.send("GET", download.replacingOccurrences(of: "/download/", with: "/upload/")).status != 200)

            try FileManager.default.removeItem(atPath: s.store.assets.path(of: up.checksum))
            let missing = try await Self.send("GET", download)
            #expect(missing.status == 404)
        }
    }

    @Test func rangeRequestsGetPartialContent() async throws {
        try await withServer { s in
            let content = bytes(100_000, seed: 5)
            let up = try await upload(s, content)
            _ = try await savePhoto(s, "r", assetJSON: up.json)
            let url = try #require(downloadURL(try await lookup(s, "r").records.first))
            let middle = try await Self.send("GET", url, headers: ["Range": "bytes=1000-1999"])
            #expect(middle.status == 206)
            #expect(middle.body == Array(content[1000..<2000]))
            #expect(middle.headers["content-range"] == "bytes 1000-1999/100000")
            let tail = try await Self.send("GET", url, headers: ["Range": "bytes=-10"])
            #expect(tail.status == 206)
            #expect(tail.body == Array(content.suffix(10)))
            let open = try await Self.send("GET", url, headers: ["Range": "bytes=99990-"])
            #expect(open.body == Array(content.suffix(10)))
            let outside = try await Self.send("GET", url, headers: ["Range": "bytes=200000-"])
            #expect(outside.status == 416)
            #expect(outside.headers["content-range"] == "bytes */100000")
        }
    }

    @Test func anUploadOverTheLimitIs413NamingItAndKeepsNothing() async throws {
        try await withServer { s in
            let url = try await uploadURL(s)
            let r = try await Self.send("POST", url, body: bytes(Int(Self.maxAssetSize) + 1, seed: 1)).reply
            #expect(r.status == 413)
            #expect(r.reason.contains("\(Self.maxAssetSize)"), "\(r)")
            #expect(try await s.store.assetStatistics().files == 0)
            let tmp = s.store.assets.directory + "/tmp"
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).isEmpty)
        }
    }

    // MARK: - Lifetime

    @Test func thePhotosFlowReclaimsTheSpaceAfterDeletion() async throws {
        try await withServer { s in
            let zone = "Photos"
            _ = try await HTTP.post(
                s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(zone)"}}}]}"#)
            let content = bytes(1 << 20, seed: 77)
            let up = try await upload(s, content, zone: zone)
            let saved = try await savePhoto(s, "beach", assetJSON: up.json, zone: zone)
            #expect(saved.records.first?["serverErrorCode"] == nil, "\(saved)")
            let listed = try await HTTP.post(s.url("records/query"), #"{"zoneID":{"zoneName":"\#(zone)"},"query":{"recordType":"Photo"}}"#)
            #expect(listed.records.count == 1)
            let url = try #require(downloadURL(listed.records.first))
            #expect(try await Self.send("GET", url).body == content)

            // Online, with the server running: nothing referenced goes, however old.
            #expect(try await s.store.collectAssetGarbage(gracePeriod: -10).deletedFiles == 0)
            let deleted = try await HTTP.post(
                s.url("records/modify"),
                #"{"zoneID":{"zoneName":"\#(zone)"},"operations":[{"operationType":"forceDelete","record":{"recordName":"beach"}}]}"#)
            #expect(deleted.status == 200, "\(deleted)")
            let gc = try await s.store.collectAssetGarbage(gracePeriod: -10)
            #expect(gc.deletedFiles == 1)
            #expect(gc.deletedBytes == Int64(content.count))
            #expect(try await s.store.assetStatistics().files == 0)
            #expect(try await Self.send("GET", url).status == 404)
        }
    }

    // MARK: - assets/rereference

    @Test func rereferencedAssetsGoIntoAnotherRecordWithoutAnUploadAndOnlyForTheirCaller() async throws {
        try await withServer { s in
            let content = bytes(300_000, seed: 31)
            let up = try await upload(s, content)
            #expect(try await savePhoto(s, "orig", assetJSON: up.json).records.first?["serverErrorCode"] == nil)
            let a = try await upload(s, [1, 2, 3], field: "pages")
            let b = try await upload(s, [4, 5], field: "pages")
            let al = try await savePhoto(s, "al", assetJSON: "[\(a.json),\(b.json)]", field: "pages", type: "ASSET_LIST")
            #expect(al.records.first?["serverErrorCode"] == nil, "\(al)")

            let r = try await HTTP.post(
                s.url("assets/rereference"),
                #"{"assets":[{"recordName":"orig","fieldName":"image"},{"recordName":"al","fieldName":"pages"},"#
                    + #"{"recordName":"nope","fieldName":"image"},{"recordName":"orig","fieldName":"title"}]}"#)
            #expect(r.status == 200, "\(r)")
            let items = r.json["assets"]?.arrayValue ?? []
            #expect(items.count == 5, "\(r)")
            guard items.count == 5 else { return }
            // The single field's asset: its checksum and size, a receipt, and a download URL of the same bytes.
            #expect(items[0]["recordName"]?.stringValue == "orig" && items[0]["fieldName"]?.stringValue == "image")
            #expect(items[0]["fileChecksum"]?.stringValue == up.checksum && items[0]["size"]?.int64Value == Int64(content.count))
            let url = try #require(items[0]["downloadURL"]?.stringValue).replacingOccurrences(of: "${f}", with: "x")
            #expect(try await Self.send("GET", url).body == content)
            // The list's members, in order, each with its index.
            #expect(items[1]["fileChecksum"]?.stringValue == a.checksum && items[1]["index"]?.int64Value == 0)
            #expect(items[2]["fileChecksum"]?.stringValue == b.checksum && items[2]["index"]?.int64Value == 1)
            // A record that is not there, a field that holds no asset: per-item errors.
            #expect(items[3]["recordName"]?.stringValue == "nope" && items[3]["serverErrorCode"]?.stringValue == "NOT_FOUND", "\(r)")
            #expect(items[4]["serverErrorCode"]?.stringValue == "BAD_REQUEST", "\(r)")
            #expect(items[4]["reason"]?.stringValue?.contains("'title'") == true, "\(r)")

            // The receipt puts the file into another record's field of another name — no upload.
            let receipt = try #require(items[0]["receipt"]?.stringValue)
            let value = #"{"fileChecksum":"\#(up.checksum)","size":\#(content.count),"receipt":"\#(receipt)"}"#
            let copy = try await savePhoto(s, "copy", assetJSON: value, field: "cover")
            #expect(copy.records.first?["serverErrorCode"] == nil, "\(copy)")
            let copied = try #require(downloadURL(try await lookup(s, "copy").records.first, field: "cover"))
            #expect(try await Self.send("GET", copied).body == content)
            #expect(try await s.store.assetStatistics().files == 3, "the copy takes no space of its own")
            // With the original gone, the copy keeps the file.
            let deleted = try await HTTP.post(
                s.url("records/modify"), #"{"operations":[{"operationType":"forceDelete","record":{"recordName":"orig"}}]}"#)
            #expect(deleted.status == 200, "\(deleted)")
            #expect(try await s.store.collectAssetGarbage(gracePeriod: -10).deletedFiles == 0)
            #expect(try await Self.send("GET", copied).body == content)

            // Bob cannot rereference Alice's records (his database has no such record), nor use her receipt.
            let his = try await HTTP.post(
                s.url("assets/rereference", as: "bob"), #"{"assets":[{"recordName":"copy","fieldName":"cover"}]}"#)
            #expect(his.json["assets"]?.arrayValue?.first?["serverErrorCode"]?.stringValue == "NOT_FOUND", "\(his)")
            let stolen = try await savePhoto(s, "stolen", assetJSON: value, as: "bob")
            #expect(stolen.records.first?["serverErrorCode"]?.stringValue == "ACCESS_DENIED", "\(stolen)")

            // Requests that name nothing, or leave out a field's name, are refused whole, naming what is missing.
            let empty = try await HTTP.post(s.url("assets/rereference"), #"{"assets":[]}"#)
            #expect(empty.status == 400 && empty.json["serverErrorCode"]?.stringValue == "BAD_REQUEST", "\(empty)")
            let unnamed = try await HTTP.post(s.url("assets/rereference"), #"{"assets":[{"recordName":"copy"}]}"#)
            #expect(unnamed.status == 400 && unnamed.json["reason"]?.stringValue?.contains("assets[0].fieldName") == true, "\(unnamed)")
        }
    }
}
