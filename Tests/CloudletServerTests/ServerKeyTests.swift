import CloudletWire
import Cloudlet
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// Server-to-server keys: ECDSA P-256 keys made, and requests signed, by the `openssl` command line — not by our
/// own code — the way CloudKit's server-side clients sign (`date:base64(sha256(body)):subpath`).
@Suite(.liveServer, .serialized) struct ServerKeyTests {
    /// A P-256 key pair made by `openssl ecparam`, and its public key added for `container`.
    struct Key {
        let privatePath: String
        let publicPEM: String
        let id: String
    }

    static func makeKey(_ dir: TempDir, _ name: String, curve: String = "prime256v1") async throws -> (privatePath: String, publicPEM: String) {
        let priv = dir.sub("\(name).pem"), pub = dir.sub("\(name).pub.pem")
        let gen = try await ChildProcess.run("/usr/bin/openssl", ["ecparam", "-genkey", "-name", curve, "-noout", "-out", priv])
        try #require(gen.status == 0, "openssl ecparam: \(gen.err)")
        let out = try await ChildProcess.run("/usr/bin/openssl", ["ec", "-in", priv, "-pubout", "-out", pub])
        try #require(out.status == 0, "openssl ec: \(out.err)")
        return (priv, try String(contentsOfFile: pub, encoding: .utf8))
    }

    static func addKey(_ s: LiveServer, _ dir: TempDir, _ name: String, container: String = LiveServer.container) async throws -> Key {
        let (priv, pem) = try await makeKey(dir, name)
        let id = try await Credentials(store: s.store).addServerKey(container: container, pem: pem)
        return Key(privatePath: priv, publicPEM: pem, id: id)
    }

    /// `openssl dgst -sha256 -sign` of `message`, base64.
    static func sign(_ message: String, with key: Key, _ dir: TempDir) async throws -> String {
        let msg = dir.sub("msg-\(UUID().uuidString)"), sig = msg + ".sig"
        try Data(message.utf8).write(to: URL(fileURLWithPath: msg))
        let r = try await ChildProcess.run("/usr/bin/openssl", ["dgst", "-sha256", "-sign", key.privatePath, "-out", sig, msg])
        try #require(r.status == 0, "openssl dgst: \(r.err)")
        return Base64.encode(Array(try Data(contentsOf: URL(fileURLWithPath: sig))))
    }

    /// Sends `body` to `/database/1/{container}/development/{db}/{op}` signed with `key` as CloudKit clients do;
    /// `signedPath` and `date` override what is signed (to make bad requests).
    static func signed(
        _ s: LiveServer, _ key: Key, _ dir: TempDir, _ op: String, body: String, db: String = "public", method: String = "POST",
        container: String = LiveServer.container, date: Date = Date(), signedBody: String? = nil, withQuery: Bool = false,
        keyID: String? = nil
    ) async throws -> Reply {
        let path = "/database/1/\(container)/development/\(db)/\(op)"
        let query = withQuery ? "?trace=1" : ""
        let iso = ISO8601DateFormatter().string(from: date)
        let hash = Base64.encode(Secrets.sha256(Array((signedBody ?? body).utf8)))
        let signature = try await sign("\(iso):\(hash):\(path)\(query)", with: key, dir)
        return try await HTTP.send(
            method, s.server.url + path + query, body: method == "GET" ? nil : Array(body.utf8),
            headers: [
                "X-Apple-CloudKit-Request-KeyID": keyID ?? key.id, "X-Apple-CloudKit-Request-ISO8601Date": iso,
                "X-Apple-CloudKit-Request-SignatureV1": signature,
            ])
    }

    @Test func aKeySignedByOpenSSLActsOnThePublicDatabaseAsTheDeveloper() async throws {
        let s = try live
        let dir = TempDir("s2s")
        let key = try await Self.addKey(s, dir, "dev")
        #expect(key.id.count == 64)
        // Adding the same key again names it the same.
        #expect(try await Credentials(store: s.store).addServerKey(container: LiveServer.container, pem: key.publicPEM) == key.id)
        let n = unique("s2s")
        let created = try await Self.signed(s, key, dir, "records/modify", body: #"{"operations":[\#(createOp(n))]}"#)
        #expect(created.status == 200 && created.records.first?["serverErrorCode"] == nil, "\(created)")
        #expect(created.records.first?["created"]?["userRecordName"]?.stringValue == defaultOwnerName, "\(created)")
        // The query string signed too (some clients do), and a GET with an empty body.
        let looked = try await Self.signed(s, key, dir, "records/lookup", body: #"{"records":[{"recordName":"\#(n)"}]}"#, withQuery: true)
        #expect(looked.status == 200 && looked.records.first?["recordName"]?.stringValue == n, "\(looked)")
        let zones = try await Self.signed(s, key, dir, "zones/list", body: "", method: "GET")
        #expect(zones.status == 200 && zones.zones.count == 1, "\(zones)")
        // As the developer it may change a record alice created, which other users may not.
        let alices = unique("alice")
        _ = try await HTTP.post(s.url("records/modify", db: "public"), #"{"operations":[\#(createOp(alices))]}"#)
        let changed = try await Self.signed(
            s, key, dir, "records/modify",
            body: #"{"operations":[{"operationType":"forceUpdate","record":{"recordName":"\#(alices)","recordType":"Note","fields":{"title":{"value":"dev"}}}}]}"#)
        #expect(changed.status == 200 && changed.records.first?["serverErrorCode"] == nil, "\(changed)")
        // No private database, no user's routes.
        let priv = try await Self.signed(s, key, dir, "records/lookup", body: #"{"records":[]}"#, db: "private")
        #expect(priv.status == 403 && priv.serverErrorCode == "ACCESS_DENIED", "\(priv)")
        let caller = try await Self.signed(s, key, dir, "users/caller", body: "", method: "GET")
        #expect(caller.status == 403 && caller.serverErrorCode == "ACCESS_DENIED", "\(caller)")
    }

    @Test func everyBadSignatureIsAuthenticationFailed() async throws {
        let s = try live
        let dir = TempDir("s2s-bad")
        let key = try await Self.addKey(s, dir, "k")
        let other = try await Self.addKey(s, dir, "other", container: LiveServer.otherContainer)
        let body = #"{"records":[]}"#
        func expectFailed(_ r: Reply, _ words: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(r.status == 401 && r.serverErrorCode == "AUTHENTICATION_FAILED" && r.reason.contains(words), "\(r)", sourceLocation: sourceLocation)
        }
        // The baseline passes, so each failure below is the one thing changed.
        #expect(try await Self.signed(s, key, dir, "records/lookup", body: body).status == 200)
        expectFailed(try await Self.signed(s, key, dir, "records/lookup", body: body, date: Date().addingTimeInterval(-11 * 60)), "10 minutes")
        expectFailed(try await Self.signed(s, key, dir, "records/lookup", body: body, date: Date().addingTimeInterval(11 * 60)), "10 minutes")
        expectFailed(try await Self.signed(s, key, dir, "records/lookup", body: body, signedBody: #"{"records":[1]}"#), "does not match")
        expectFailed(try await Self.signed(s, key, dir, "records/lookup", body: body, keyID: String(repeating: "0", count: 64)), "unknown or revoked")
        expectFailed(try await Self.signed(s, other, dir, "records/lookup", body: body), "not a key of container")
        // Signed by another key than the one named.
        expectFailed(try await Self.signed(s, other, dir, "records/lookup", body: body, container: LiveServer.otherContainer, keyID: key.id), "not a key of container")
        let forged = try await Self.signed(s, Key(privatePath: other.privatePath, publicPEM: "", id: key.id), dir, "records/lookup", body: body)
        expectFailed(forged, "does not match")
        // Revoked (through the admin API of the running server): dead from now on.
        let listed = try await HTTP.send("GET", "\(s.server.url)/cloudlet/admin/keys/list", headers: HTTP.bearer(s.adminToken))
        #expect(listed.json["keys"]?.arrayValue?.contains { $0["keyID"]?.stringValue == key.id } == true, "\(listed)")
        let revoked = try await HTTP.send(
            "POST", "\(s.server.url)/cloudlet/admin/keys/revoke?keyID=\(key.id)", body: [], headers: HTTP.bearer(s.adminToken))
        #expect(revoked.status == 200, "\(revoked)")
        expectFailed(try await Self.signed(s, key, dir, "records/lookup", body: body), "unknown or revoked")
        #expect(try await Credentials(store: s.store).serverKeys(container: LiveServer.container).first { $0.keyID == key.id }?.revoked == true)
        await #expect(throws: CloudletError.self) { try await Credentials(store: s.store).addServerKey(container: LiveServer.container, pem: key.publicPEM) }
    }

    @Test func onlyP256PublicKeysAreAccepted() async throws {
        let s = try live
        let dir = TempDir("s2s-curve")
        let (_, p384) = try await Self.makeKey(dir, "p384", curve: "secp384r1")
        for (pem, words) in [(p384, "P-256"), ("not a key", "PEM public key")] {
            do {
                _ = try await Credentials(store: s.store).addServerKey(container: LiveServer.container, pem: pem)
                Issue.record("accepted \(words)")
            } catch let e as CloudletError {
                #expect(e.code == .invalidArguments && e.message.contains(words), "\(e)")
            }
        }
    }
}
