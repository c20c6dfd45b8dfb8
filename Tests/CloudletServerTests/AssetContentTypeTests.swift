import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// The `Content-Type` of asset downloads (`AssetContentType`): from the file name the client puts in place of `${f}`,
/// else from the file's first bytes, else `application/octet-stream`; never a type a browser would run.
@Suite struct AssetContentTypeTests {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8)
    /// An ISO media file's start: box size, `ftyp`, major brand.
    static func isoMedia(_ brand: String) -> [UInt8] { [0, 0, 0, 24] + Array("ftyp\(brand)".utf8) + [0, 0, 0, 0] }

    @Test(arguments: [
        ([0xFF, 0xD8, 0xFF, 0xE0, 0, 16] + Array("JFIF".utf8), "image/jpeg"),
        (png, "image/png"),
        (Array("GIF89a".utf8) + [1, 0, 1, 0], "image/gif"),
        (Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8 ".utf8), "image/webp"),
        (Array("%PDF-1.7\n".utf8), "application/pdf"),
        (isoMedia("heic"), "image/heic"),
        (isoMedia("mif1"), "image/heif"),
        (isoMedia("avif"), "image/avif"),
        (isoMedia("qt  "), "video/quicktime"),
        (isoMedia("isom"), "video/mp4"),
        (isoMedia("M4A "), "audio/mp4"),
    ] as [([UInt8], String)])
    func theFirstBytesOfCommonFormatsNameTheirType(head: [UInt8], type: String) {
        #expect(AssetContentType.sniff(head) == type)
    }

    @Test func bytesOfNoKnownFormatAreNotGivenAType() {
        #expect(AssetContentType.sniff([]) == nil)
        #expect(AssetContentType.sniff([0xFF, 0xD8]) == nil)  // too short to be a JPEG
        #expect(AssetContentType.sniff(Array("<html><script>".utf8)) == nil)
        #expect(AssetContentType.sniff(Array("RIFF\0\0\0\0WAVE".utf8)) == nil)
    }

    @Test func theExtensionOfTheNameGivesTheTypeOnlyForPassiveTypes() {
        #expect(AssetContentType.fromExtension("beach.JPG") == "image/jpeg")
        #expect(AssetContentType.fromExtension("clip.mov") == "video/quicktime")
        #expect(AssetContentType.fromExtension("notes.txt") == "text/plain; charset=utf-8")
        for name in ["page.html", "x.svg", "a.js", "feed.xml", "${f}", "noextension", ".jpg", "a.jpg.exe"] {
            #expect(AssetContentType.fromExtension(name) == nil, "\(name)")
        }
    }

    /// Uploads `content`, saves it in a Photo record and returns its download URL with `${f}` left in place.
    private func downloadURL(_ s: LiveServer, _ content: [UInt8], record: String) async throws -> String {
        let up = try await uploadAsset(s, content, field: "image")
        let saved = try await HTTP.post(
            s.url("records/modify", as: "alice"),
            #"{"operations":[{"operationType":"create","record":{"recordName":"\#(record)","recordType":"Photo","fields":{"image":{"value":\#(up.json),"type":"ASSETID"}}}}]}"#
        )
        #expect(saved.records.first?["serverErrorCode"] == nil, "\(saved)")
        return try #require(saved.records.first?["fields"]?["image"]?["value"]?["downloadURL"]?.stringValue, "\(saved)")
    }

    private func contentType(_ url: String, name: String, range: String? = nil) async throws -> String? {
        let got = try await AssetsAPITests.send(
            "GET", url.replacingOccurrences(of: "${f}", with: name), headers: range.map { ["Range": $0] } ?? [:])
        #expect(got.status == (range == nil ? 200 : 206))
        #expect(got.headers["x-content-type-options"] == "nosniff")
        return got.headers["content-type"]
    }

    @Test func downloadsCarryTheTypeOfTheNameElseOfTheBytesElseOctetStream() async throws {
        let s = try await LiveServer.start()
        try await withCleanup({ await s.shutdown() }) {
            let image = try await downloadURL(s, Self.png + [UInt8](repeating: 7, count: 5000), record: "png")
            #expect(try await contentType(image, name: "beach.jpg") == "image/jpeg")  // the client's name wins
            #expect(try await contentType(image, name: "%24%7Bf%7D") == "image/png")  // `${f}` as given: the bytes tell
            #expect(try await contentType(image, name: "photo") == "image/png")
            #expect(try await contentType(image, name: "page.html") == "image/png")  // never text/html
            #expect(try await contentType(image, name: "x", range: "bytes=100-199") == "image/png")  // the file's, not the range's
            let page = try await downloadURL(s, Array("<html><script>alert(1)</script></html>".utf8), record: "html")
            #expect(try await contentType(page, name: "page.html") == "application/octet-stream")
            #expect(try await contentType(page, name: "page.svg") == "application/octet-stream")
            #expect(try await contentType(page, name: "notes.txt") == "text/plain; charset=utf-8")
        }
    }
}
