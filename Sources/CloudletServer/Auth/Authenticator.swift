import CloudletConcurrency
import CloudletWire
import Cloudlet
import Foundation
import Synchronization
import CloudletCore

extension String {
    /// Without leading and trailing spaces.
    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}

/// Checks a request's credentials the way CloudKit Web Services does:
///
/// - A request with `X-Apple-CloudKit-Request-KeyID` is signed with a server-to-server key
///   (``authenticateServerKey(_:container:)``) and needs no token.
/// - Otherwise `ckAPIToken` (query parameter) is required and grants one container. Missing or unknown:
///   `AUTHENTICATION_FAILED` (401).
/// - A valid token for another container: `ACCESS_DENIED` (403), whether the server knows that container or not
///   (a token must not reveal which other containers exist).
/// - `ckWebAuthToken` (optional) names a user; unknown: `AUTHENTICATION_FAILED` (401). Whether a user is needed
///   is decided per route by the caller.
///
/// A token once found is cached by its text; unknown tokens are not cached. Tokens change while a server runs only
/// through its own routes (the CLI cannot open a store a server holds): a refresh and the admin routes that revoke
/// tokens or remove users call ``forget()``.
final class Authenticator: Sendable {
    let credentials: Credentials
    /// The console's sessions, each opened with an admin credential (``ConsoleHandler``).
    let consoleSessions = ConsoleSessions()
    /// Read by every request, written once per new token: readers do not queue behind each other.
    private let cache = ReadWriteLock(Cache())

    /// Keyed by the token exactly as the request carries it (percent-decoded): hashing 64 characters with the
    /// table's seeded hasher costs far less than the SHA-256 through OpenSSL's EVP the key used to be (two per
    /// request, ~3 % of a `records/lookup`'s server CPU). Only tokens the store confirmed are kept, so the tables
    /// hold no more entries than there are tokens; an unknown token is looked up each time and never cached.
    private struct Cache {
        var containers: [String: String] = [:]  // API token → container
        var users: [String: (user: Credentials.User, expires: Int64?)] = [:]  // web auth token → user, expiry
        var admins: Set<String> = []
    }

    init(credentials: Credentials) { self.credentials = credentials }

    func authenticate(_ request: HTTPRequest, container: String) throws -> Principal {
        if request.serverKeyID != nil { return try authenticateServerKey(request, container: container) }
        guard let apiToken = request.queryParameter("ckAPIToken"), !apiToken.isEmpty else {
            throw APIError("AUTHENTICATION_FAILED", "the ckAPIToken query parameter is missing")
        }
        let webToken = request.queryParameter("ckWebAuthToken").flatMap { $0.isEmpty ? nil : $0 }
        // One lock for both tokens: every request comes through here.
        var (granted, cached) = cache.read { c in (c.containers[apiToken], webToken.flatMap { c.users[$0] }) }

        if granted == nil {
            let credentials = credentials
            granted = try ThreadBridge.wait { try await credentials.container(forAPIToken: apiToken) }
            guard let g = granted else { throw APIError("AUTHENTICATION_FAILED", "the ckAPIToken is not valid") }
            cache.write { $0.containers[apiToken] = g }
        }
        if granted != container {
            // The same answer whether the server has that container or not: a token reveals no other container.
            throw APIError("ACCESS_DENIED", "the ckAPIToken is for container '\(granted!)', not '\(container)'")
        }
        if let webToken, cached == nil {
            let credentials = credentials
            cached = try ThreadBridge.wait { try await credentials.webAuthToken(webToken) }
            guard let found = cached else { throw APIError("AUTHENTICATION_FAILED", "the ckWebAuthToken is not valid") }
            cache.write { $0.users[webToken] = found }
        }
        if let expires = cached?.expires, expires <= Credentials.now() {
            throw APIError(
                "AUTHENTICATION_FAILED", "the ckWebAuthToken has expired; refresh it before it expires (POST /cloudlet/auth/refresh) or ask for a new one")
        }
        return Principal(container: container, user: cached?.user)
    }

    /// Forgets every token found so far: after tokens were revoked or users removed while the server runs.
    func forget() { cache.write { $0 = Cache() } }

    /// How far a signed request's date may be from the server's clock.
    static let signatureWindow: Double = 600

    /// Checks a request signed with a server-to-server key, the way CloudKit does: `X-Apple-CloudKit-Request-KeyID`
    /// names a key of `container` that is not revoked, `X-Apple-CloudKit-Request-ISO8601Date` is within ±10 minutes
    /// of now, and `X-Apple-CloudKit-Request-SignatureV1` is the key's base64 ECDSA-SHA256 signature of
    /// `date:base64(sha256(body)):subpath`, the subpath being the URL path from `/database/` — with or without the
    /// query string (clients differ). Every failure is `AUTHENTICATION_FAILED` (401) saying which check failed.
    func authenticateServerKey(_ request: HTTPRequest, container: String, now: Date = Date()) throws -> Principal {
        func fail(_ why: String) -> APIError { APIError("AUTHENTICATION_FAILED", "server-to-server request: \(why)") }
        guard let keyID = request.serverKeyID, let dateText = request.serverKeyDate,
            let signatureText = request.serverKeySignature
        else {
            throw fail(
                "X-Apple-CloudKit-Request-KeyID, X-Apple-CloudKit-Request-ISO8601Date and X-Apple-CloudKit-Request-SignatureV1 "
                    + "are all needed")
        }
        guard let date = Self.parseISO8601(dateText) else {
            throw fail("X-Apple-CloudKit-Request-ISO8601Date '\(dateText)' is not an ISO 8601 date (2026-01-02T03:04:05Z)")
        }
        guard abs(date.timeIntervalSince(now)) <= Self.signatureWindow else {
            throw fail("the request date \(dateText) is more than 10 minutes from the server's clock")
        }
        guard let signature = Base64.decode(signatureText), !signature.isEmpty else {
            throw fail("X-Apple-CloudKit-Request-SignatureV1 is not base64")
        }
        let credentials = credentials
        guard let (keyContainer, key) = try ThreadBridge.wait({ try await credentials.activeServerKey(keyID) }) else {
            throw fail("key '\(keyID)' is unknown or revoked")
        }
        guard keyContainer == container else { throw fail("key '\(keyID)' is not a key of container '\(container)'") }
        let bodyHash = Base64.encode(Secrets.sha256(request.body))
        var subpaths = [request.path]
        if !request.query.isEmpty { subpaths.append(request.path + "?" + request.query) }
        let signed = subpaths.contains { key.verify(signature: signature, of: Array("\(dateText):\(bodyHash):\($0)".utf8)) }
        guard signed else { throw fail("the signature does not match (signed: date:base64(sha256(body)):subpath)") }
        return Principal(container: container, user: nil, keyID: keyID)
    }

    /// `2026-01-02T03:04:05Z`, with or without fractional seconds, any offset.
    static func parseISO8601(_ s: String) -> Date? {
        let plain = ISO8601DateFormatter()
        if let d = plain.date(from: s) { return d }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: s)
    }

    /// Checks the admin credential of a request to an admin route or the metrics: `Authorization: Bearer <token>`
    /// or the `ckAdminToken` query parameter. - Throws: `ACCESS_DENIED` (403) without one — an API token or a web
    /// auth token is no admin credential; `AUTHENTICATION_FAILED` (401) for a token that is not an admin token.
    func authenticateAdmin(_ request: HTTPRequest, for what: String) throws {
        let bearer = request.authorization.flatMap { h -> String? in
            let parts = h.split(separator: " ", maxSplits: 1)
            return parts.count == 2 && parts[0].lowercased() == "bearer" ? String(parts[1]).trimmingSpaces : nil
        }
        guard let token = bearer ?? request.queryParameter("ckAdminToken"), !token.isEmpty else {
            throw APIError(
                "ACCESS_DENIED",
                "\(what) needs an admin credential (Authorization: Bearer <token>, from `cloudlet token add --admin`); "
                    + "API tokens and web auth tokens are not admin credentials")
        }
        if cache.read({ $0.admins.contains(token) }) { return }
        let credentials = credentials
        guard try ThreadBridge.wait({ try await credentials.isAdminToken(token) }) else {
            throw APIError("AUTHENTICATION_FAILED", "the admin token is not valid")
        }
        cache.write { _ = $0.admins.insert(token) }
    }
}
