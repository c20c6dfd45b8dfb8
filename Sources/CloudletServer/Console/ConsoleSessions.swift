import Foundation
import Synchronization

/// The console's signed-in sessions, in memory: a session ID (the cookie's value) → its CSRF token and expiry.
///
/// A session is made only from an admin credential (``ConsoleHandler``); it lasts ``lifetime`` seconds from sign-in
/// and ends at sign-out, when any token is revoked, or when the server stops. Only SHA-256 fingerprints of session
/// IDs are kept, like every other secret of the server.
///
/// Kept in memory on purpose (docs/console.md, *Sign-in, session and CSRF*): a session is a full admin credential
/// for 12 hours, so a restart is the operator's way to end every one at once; none is ever written to the data
/// directory, its backups or (through the catalog) the other nodes of a cluster; and signing in costs no durable
/// write. What it costs — signing in again after a restart — the page softens: it comes back to where it was.
final class ConsoleSessions: Sendable {
    /// How long a session lasts from sign-in: 12 hours.
    static let lifetime: Double = 12 * 3600
    /// The most sessions kept at once; signing in past it drops the oldest.
    static let capacity = 1024

    struct Session: Sendable {
        /// Sent by the page as `X-Cloudlet-CSRF` on every state-changing request.
        var csrfToken: String
        var expires: Date
    }

    private let sessions = Mutex<[String: Session]>([:])
    private let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date = { Date() }) { self.now = now }

    /// A new session: its ID (for the cookie) and the session.
    func create() throws -> (id: String, session: Session) {
        let id = try Secrets.newToken()
        let session = Session(csrfToken: try Secrets.newToken(), expires: now().addingTimeInterval(Self.lifetime))
        let key = Secrets.fingerprint(id)
        let t = now()
        sessions.withLock { s in
            s = s.filter { $0.value.expires > t }
            if s.count >= Self.capacity, let oldest = s.min(by: { $0.value.expires < $1.value.expires }) {
                s.removeValue(forKey: oldest.key)
            }
            s[key] = session
        }
        return (id, session)
    }

    /// The live session with ID `id`, if any.
    func session(_ id: String?) -> Session? {
        guard let id, Secrets.isWellFormed(id) else { return nil }
        let key = Secrets.fingerprint(id)
        let t = now()
        return sessions.withLock { s in
            guard let found = s[key] else { return nil }
            if found.expires <= t {
                s.removeValue(forKey: key)
                return nil
            }
            return found
        }
    }

    /// Ends session `id` (sign-out).
    func remove(_ id: String) {
        let key = Secrets.fingerprint(id)
        _ = sessions.withLock { $0.removeValue(forKey: key) }
    }

    /// Ends every session (after admin credentials were revoked).
    func removeAll() { sessions.withLock { $0.removeAll() } }
}
