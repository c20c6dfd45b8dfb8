import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// Tokens and users over their life: listed, revoked, rotated, removed (through the admin API of a running server,
/// which forgets what it had cached), and web auth tokens that expire and are refreshed.
@Suite struct TokenLifecycleTests {
    func admin(_ s: LiveServer, _ op: String, method: String = "POST") async throws -> Reply {
        try await HTTP.send(method, "\(s.server.url)/cloudlet/admin/\(op)", body: method == "POST" ? [] : nil, headers: HTTP.bearer(s.adminToken))
    }

    @Test func tokensAreListedWithoutSecretsAndRevokedAtOnce() async throws {
        let s = try await LiveServer.start()
        try await withCleanup({ await s.shutdown() }) {
            let lookup = s.url("records/lookup", db: "public", as: nil, container: LiveServer.otherContainer, apiToken: s.otherAPIToken)
            #expect(try await HTTP.post(lookup, #"{"records":[]}"#).status == 200)  // cached by the server now
            let listed = try await admin(s, "tokens/list", method: "GET")
            let tokens = listed.json["tokens"]?.arrayValue ?? []
            #expect(tokens.count == 3 && !listed.text.contains(s.apiToken) && !listed.text.contains(s.adminToken), "\(listed)")
            let other = try #require(tokens.first { $0["container"]?.stringValue == LiveServer.otherContainer }?["id"]?.stringValue)
            #expect(other == String(Secrets.fingerprint(s.otherAPIToken).prefix(16)))
            #expect(try await admin(s, "tokens/revoke?id=\(other)").status == 200)
            let after = try await HTTP.post(lookup, #"{"records":[]}"#)
            #expect(after.status == 401 && after.serverErrorCode == "AUTHENTICATION_FAILED", "\(after)")
            #expect(try await admin(s, "tokens/revoke?id=\(other)").serverErrorCode == "NOT_FOUND")
            #expect(try await admin(s, "tokens/revoke?id=abc").status == 400)
            // The container's own token is untouched.
            #expect(try await HTTP.post(s.url("records/lookup", db: "public", as: nil), #"{"records":[]}"#).status == 200)
        }
    }

    @Test func rotatingOrRemovingAUserKillsTheirOldTokens() async throws {
        let s = try await LiveServer.start()
        try await withCleanup({ await s.shutdown() }) {
            let lookup = #"{"records":[]}"#
            #expect(try await HTTP.post(s.url("records/lookup", as: "alice"), lookup).status == 200)
            let rotated = try await admin(s, "users/rotate?user=alice")
            let fresh = try #require(rotated.json["ckWebAuthToken"]?.stringValue, "\(rotated)")
            let old = try await HTTP.post(s.url("records/lookup", as: "alice"), lookup)
            #expect(old.status == 401 && old.serverErrorCode == "AUTHENTICATION_FAILED", "\(old)")
            #expect(try await HTTP.post(s.url("records/lookup", as: fresh), lookup).status == 200)
            let users = try await admin(s, "users/list", method: "GET")
            #expect(users.json["users"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["alice", "bob"], "\(users)")
            #expect(try await admin(s, "users/remove?user=bob").status == 200)
            #expect(try await HTTP.post(s.url("records/lookup", as: "bob"), lookup).status == 401)
            #expect(try await admin(s, "users/remove?user=bob").serverErrorCode == "NOT_FOUND")
        }
    }

    @Test func anExpiredWebAuthTokenFailsAndAValidOneIsRefreshed() async throws {
        let s = try await LiveServer.start()
        try await withCleanup({ await s.shutdown() }) {
            let credentials = Credentials(store: s.store)
            let (carol, token) = try await credentials.createUser(name: "carol", tokenTTL: 3600)
            let lookup = #"{"records":[]}"#
            #expect(try await HTTP.post(s.url("records/lookup", as: token), lookup).status == 200)
            // Refresh: a new token (with the user's lifetime from now), and the old one is dead.
            let refreshed = try await HTTP.post("\(s.server.url)/cloudlet/auth/refresh?ckWebAuthToken=\(token)", "")
            let fresh = try #require(refreshed.json["ckWebAuthToken"]?.stringValue, "\(refreshed)")
            #expect((refreshed.json["expires"]?.numberValue?.int64 ?? 0) > Credentials.now())
            #expect(try await HTTP.post(s.url("records/lookup", as: token), lookup).status == 401)
            #expect(try await HTTP.post(s.url("records/lookup", as: fresh), lookup).status == 200)
            #expect(carol.name == "carol")
            // A token past its expiry (its record says so: no waiting) fails, and can no longer be refreshed.
            let (_, dated) = try await credentials.createUser(name: "dave", tokenTTL: 3600)
            let db = s.store.systemDatabase()
            var record = try await db.record(for: RecordID(recordName: "web." + Secrets.fingerprint(dated), zoneID: Credentials.zone))
            record["expires"] = .int64(Credentials.now() - 1)
            _ = try await db.modify([.forceUpdate(record)])
            let expired = try await HTTP.post(s.url("records/lookup", as: dated), lookup)
            #expect(expired.status == 401 && expired.reason.contains("expired"), "\(expired)")
            let late = try await HTTP.post("\(s.server.url)/cloudlet/auth/refresh?ckWebAuthToken=\(dated)", "")
            #expect(late.status == 401 && late.serverErrorCode == "AUTHENTICATION_FAILED", "\(late)")
        }
    }
}
