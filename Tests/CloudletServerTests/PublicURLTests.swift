import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// Every URL the server hands out comes from its public URL (`--public-url`, else the address it listens on), never
/// from the request's `Host` header (host-header injection, issue 19).
@Suite struct PublicURLTests {
    /// A request sent with `Host: evil.example`; the answer's status and body.
    private static func send(_ s: LiveServer, _ method: String, _ url: String, body: String = "") throws -> Reply {
        let pathAndQuery = String(url.dropFirst(s.server.url.count))
        let socket = try RawSocket(port: s.server.port)
        try socket.send(
            "\(method) \(pathAndQuery) HTTP/1.1\r\nHost: evil.example\r\nContent-Type: text/plain\r\n"
                + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
        let answer = socket.readToEnd()
        let parts = answer.components(separatedBy: "\r\n\r\n")
        let status = Int(parts[0].split(separator: " ").dropFirst().first ?? "") ?? 0
        let reply = Reply(status: status, body: Array(parts.dropFirst().joined(separator: "\r\n\r\n").utf8))
        #expect(!reply.text.contains("evil.example"), "\(reply)")
        return reply
    }

    @Test(arguments: ["https://db.example.com:8443/api", nil])
    func everyURLHandedOutIsThePublicURLWhateverTheHostHeader(_ configured: String?) async throws {
        let s = try await LiveServer.start { c in c.publicURL = try! configured.map(PublicURL.init) }
        try await withCleanup({ await s.shutdown() }) {
            let base = configured ?? s.server.url
            #expect(s.server.publicURL == base)
            // The sign-in redirect of AUTHENTICATION_REQUIRED.
            let signIn = try Self.send(s, "POST", s.url("records/lookup", as: nil), body: #"{"records":[]}"#)
            #expect(signIn.serverErrorCode == "AUTHENTICATION_REQUIRED", "\(signIn)")
            #expect(signIn.json["redirectURL"]?.stringValue == base + "/cloudlet/signin?container=\(LiveServer.container)", "\(signIn)")
            // Courier tokens: created and registered.
            let created = try Self.send(s, "POST", s.url("tokens/create", db: "public"), body: "{}")
            let token = try #require(created.json["apnsToken"]?.stringValue, "\(created)")
            let registered = try Self.send(
                s, "POST", s.url("tokens/register", db: "public"), body: #"{"apnsToken":"my-own-courier-token-1"}"#)
            for (reply, t) in [(created, token), (registered, "my-own-courier-token-1")] {
                #expect(reply.json["webcourierURL"]?.stringValue == base + "/cloudlet/notifications/poll?token=\(t)", "\(reply)")
                let ws = base.replacingOccurrences(of: "http", with: "ws", options: .anchored)
                #expect(reply.json["websocketURL"]?.stringValue == ws + "/cloudlet/notifications/ws?token=\(t)", "\(reply)")
            }
            // Asset upload URLs, and the download URL of the record the asset is saved in.
            let upload = try Self.send(
                s, "POST", s.url("assets/upload"), body: #"{"tokens":[{"recordType":"Photo","fieldName":"image"}]}"#)
            let uploadURL = try #require(upload.json["tokens"]?.arrayValue?.first?["url"]?.stringValue, "\(upload)")
            #expect(uploadURL.hasPrefix(base + AssetTransfer.uploadPrefix), "\(uploadURL)")
            // What a reverse proxy at the public URL does: hand the path on to the server.
            let up = try await HTTP.send("POST", s.server.url + uploadURL.dropFirst(base.count), body: [1, 2, 3])
            var w = JSONWriter()
            w.value(try #require(up.json["singleFile"], "\(up)"))
            let name = unique("public-url")
            let saved = try await HTTP.post(
                s.url("records/modify"),
                #"{"operations":[\#(createOp(name, type: "Photo", fields: #""image":{"value":\#(String(decoding: w.bytes, as: UTF8.self))}"#))]}"#)
            #expect(saved.records.first?["serverErrorCode"] == nil, "\(saved)")
            let found = try Self.send(s, "POST", s.url("records/lookup"), body: #"{"records":[{"recordName":"\#(name)"}]}"#)
            let download = try #require(found.records.first?["fields"]?["image"]?["value"]?["downloadURL"]?.stringValue, "\(found)")
            #expect(download.hasPrefix(base + AssetTransfer.downloadPrefix), "\(download)")
        }
    }

    @Test(arguments: [
        ("http://db.example.com", "http://db.example.com"), ("HTTPS://DB.Example.com:8443/", "https://db.example.com:8443"),
        ("https://db.example.com/cloudlet/api/", "https://db.example.com/cloudlet/api"), ("http://[::1]:8080", "http://[::1]:8080"),
        ("http://127.0.0.1:1", "http://127.0.0.1:1"),
    ])
    func aGoodPublicURLIsTakenAndNormalized(_ text: String, _ normalized: String) throws {
        #expect(try PublicURL(text).description == normalized)
    }

    @Test(arguments: [
        ("", "is empty"), ("db.example.com", "has no scheme"), ("ftp://db.example.com", "has scheme 'ftp'"),
        ("https://", "has no host"), ("https:///path", "has no host"), ("https://:8080", "has no host"),
        ("https://db.example.com:0", "has port '0'"), ("https://db.example.com:65536", "has port '65536'"),
        ("https://db.example.com:http", "has port 'http'"), ("https://db.example.com/?next=evil", "has a query"),
        ("https://db.example.com/#top", "has a fragment"), ("https://user:pw@db.example.com", "has user info"),
        ("https://db.example.com/a b", "has a space"), ("https://db_example.com", "has host 'db_example.com'"),
        ("https://db.example.com/a/../b", "'..' segment"), ("https://db.example.com//a", "empty, '.' or '..' segment"),
        ("https://[::1", "unclosed '['"),
    ])
    func aBadPublicURLIsRefusedNamingTheProblem(_ text: String, _ problem: String) {
        #expect {
            try PublicURL(text)
        } throws: { error in
            (error as? ServerSetupError)?.message.contains(problem) == true
        }
    }
}
