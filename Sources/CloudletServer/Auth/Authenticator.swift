import Cloudlet
import Synchronization

/// Checks a request's credentials the way CloudKit Web Services does:
///
/// - `ckAPIToken` (query parameter) is required and grants one container. Missing or unknown:
///   `AUTHENTICATION_FAILED` (401). Server-to-server keys (`X-Apple-CloudKit-Request-KeyID`) are not supported and
///   get the same error saying so.
/// - A container no API token was ever created for is unknown to the server: `BAD_REQUEST` (400). A valid token
///   for another, known container: `ACCESS_DENIED` (403).
/// - `ckWebAuthToken` (optional) names a user; unknown: `AUTHENTICATION_FAILED` (401). Whether a user is needed
///   is decided per route by the caller.
///
/// Tokens are never revoked while a server runs (the CLI cannot open a store a server holds), so a token once
/// found is cached by its fingerprint; unknown tokens are not cached.
final class Authenticator: Sendable {
    let credentials: Credentials
    private let cache = Mutex(Cache())

    private struct Cache {
        var containers: [String: String] = [:]  // API token fingerprint → container
        var users: [String: Credentials.User] = [:]  // web auth token fingerprint → user
        var knownContainers: Set<String> = []
    }

    init(credentials: Credentials) { self.credentials = credentials }

    func authenticate(_ request: HTTPRequest, container: String) throws -> Principal {
        guard let apiToken = request.queryParameter("ckAPIToken"), !apiToken.isEmpty else {
            if request.serverKeyID != nil {
                throw APIError(
                    "AUTHENTICATION_FAILED",
                    "server-to-server keys (X-Apple-CloudKit-Request-KeyID) are not supported by this server; use the "
                        + "ckAPIToken query parameter")
            }
            throw APIError("AUTHENTICATION_FAILED", "the ckAPIToken query parameter is missing")
        }
        guard let granted = try containerFor(apiToken: apiToken) else {
            throw APIError("AUTHENTICATION_FAILED", "the ckAPIToken is not valid")
        }
        if granted != container {
            guard try isKnown(container) else {
                throw APIError.badRequest(
                    "container '\(container)' is not known to this server (no API token was created for it)")
            }
            throw APIError("ACCESS_DENIED", "the ckAPIToken is for container '\(granted)', not '\(container)'")
        }
        var user: Credentials.User?
        if let webToken = request.queryParameter("ckWebAuthToken"), !webToken.isEmpty {
            guard let u = try userFor(webAuthToken: webToken) else {
                throw APIError("AUTHENTICATION_FAILED", "the ckWebAuthToken is not valid")
            }
            user = u
        }
        return Principal(container: granted, user: user)
    }

    private func containerFor(apiToken: String) throws -> String? {
        let key = Secrets.fingerprint(apiToken)
        if let c = cache.withLock({ $0.containers[key] }) { return c }
        let credentials = credentials
        guard let c = try EngineBridge.run({ try await credentials.container(forAPIToken: apiToken) }) else { return nil }
        cache.withLock { $0.containers[key] = c }
        return c
    }

    private func userFor(webAuthToken: String) throws -> Credentials.User? {
        let key = Secrets.fingerprint(webAuthToken)
        if let u = cache.withLock({ $0.users[key] }) { return u }
        let credentials = credentials
        guard let u = try EngineBridge.run({ try await credentials.user(forWebAuthToken: webAuthToken) }) else {
            return nil
        }
        cache.withLock { $0.users[key] = u }
        return u
    }

    private func isKnown(_ container: String) throws -> Bool {
        if cache.withLock({ $0.knownContainers.contains(container) }) { return true }
        let credentials = credentials
        guard try EngineBridge.run({ try await credentials.isKnownContainer(container) }) else { return false }
        cache.withLock { _ = $0.knownContainers.insert(container) }
        return true
    }
}
