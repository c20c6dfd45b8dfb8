import Cloudlet
import Synchronization

/// The courier tokens of `tokens/create` and `tokens/register` (``NotificationCourier``): token → whose notifications
/// it reads. In memory: a server restart forgets them (clients create a new token and keep their `after`).
///
/// A token expires ``lifetime`` seconds after its last use (sliding: creating or registering it, and every
/// long-poll or websocket opened with it, is a use), and never while a websocket opened with it is open (``hold``):
/// its last use is when the last such websocket closes, so a client that kept one open for days can reconnect with
/// the same token. An inbox (a user of a container and environment) holds at most ``perInboxCap`` tokens; one more
/// evicts the one used least recently, held ones last. Expired tokens are dropped when looked up, and swept from
/// the front of a queue ordered by when they are due, at most ``sweepBudget`` a call, so no request walks the whole
/// table. A long-poll (at most 60 s) does not hold its token; like a websocket, it is not cut when its token
/// expires or is evicted: it resolved its inbox when it began.
final class CourierTokens: Sendable {
    /// Default ``lifetime``: 24 hours since the last use.
    static let defaultLifetime: Double = 24 * 3600
    /// Default ``perInboxCap``.
    static let defaultPerInboxCap = 64
    /// Entries looked at per sweep (every create, register and lookup runs one).
    static let sweepBudget = 8

    let lifetime: Double
    let perInboxCap: Int
    /// Seconds on a monotonic clock (injected by tests).
    private let now: @Sendable () -> Double
    private let state = Mutex(State())

    private struct Entry {
        var inbox: NotificationHub.Inbox
        var lastUsed: Double
        /// Websockets open with it (``hold``): while any is, it does not expire.
        var held = 0
        /// Which insertion this is (a token registered again after it expired is a new entry).
        var serial: UInt64

        func expired(now: Double, lifetime: Double) -> Bool { held == 0 && now - lastUsed > lifetime }
    }

    private struct Due {
        var token: String
        var serial: UInt64
        var at: Double
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var byInbox: [NotificationHub.Inbox: Set<String>] = [:]
        /// Entries in order of when they are due at the earliest (non-decreasing `at`); an entry used since it was
        /// queued is queued again when it reaches the front.
        var due: [Due] = []
        var dueStart = 0
        var serial: UInt64 = 0

        mutating func remove(_ token: String) {
            guard let e = entries.removeValue(forKey: token) else { return }
            byInbox[e.inbox]?.remove(token)
            if byInbox[e.inbox]?.isEmpty == true { byInbox[e.inbox] = nil }
        }

        mutating func enqueue(_ token: String, serial: UInt64, at: Double) {
            let last = dueStart < due.count ? due[due.count - 1].at : at
            due.append(Due(token: token, serial: serial, at: max(at, last)))
        }

        mutating func sweep(now: Double, lifetime: Double, budget: Int) {
            for _ in 0..<budget {
                guard dueStart < due.count, due[dueStart].at <= now else { break }
                let d = due[dueStart]
                dueStart += 1
                guard let e = entries[d.token], e.serial == d.serial else { continue }  // removed already
                if e.expired(now: now, lifetime: lifetime) {
                    remove(d.token)
                } else {
                    enqueue(d.token, serial: e.serial, at: max(e.lastUsed, e.held > 0 ? now : 0) + lifetime)
                }
            }
            // Drop the consumed front once it is half the array (amortized O(1)).
            if dueStart > 64 && dueStart * 2 > due.count {
                due.removeFirst(dueStart)
                dueStart = 0
            }
        }
    }

    init(
        lifetime: Double = CourierTokens.defaultLifetime, perInboxCap: Int = CourierTokens.defaultPerInboxCap,
        now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds
    ) {
        precondition(lifetime > 0 && perInboxCap > 0)
        self.lifetime = lifetime
        self.perInboxCap = perInboxCap
        self.now = now
    }

    /// Adds `token` for `inbox` (used now), evicting the inbox's least recently used token when it has
    /// ``perInboxCap``. Returns false, changing nothing, when a live `token` belongs to another inbox.
    func insert(_ token: String, for inbox: NotificationHub.Inbox) -> Bool {
        let t = now()
        return state.withLock { s in
            s.sweep(now: t, lifetime: lifetime, budget: Self.sweepBudget)
            if let e = s.entries[token], !e.expired(now: t, lifetime: lifetime) {
                guard e.inbox == inbox else { return false }
                s.entries[token]?.lastUsed = t
                return true
            }
            s.remove(token)  // an expired one
            if let tokens = s.byInbox[inbox], tokens.count >= perInboxCap,
                let oldest = tokens.min(by: { a, b in
                    let (x, y) = (s.entries[a]!, s.entries[b]!)
                    return (x.held > 0 ? 1 : 0, x.lastUsed) < (y.held > 0 ? 1 : 0, y.lastUsed)
                })
            {
                s.remove(oldest)
            }
            s.serial += 1
            s.entries[token] = Entry(inbox: inbox, lastUsed: t, serial: s.serial)
            s.byInbox[inbox, default: []].insert(token)
            s.enqueue(token, serial: s.serial, at: t + lifetime)
            return true
        }
    }

    /// The inbox of a live `token`, which counts as a use; nil for an unknown or expired one (dropped then).
    func use(_ token: String) -> NotificationHub.Inbox? {
        let t = now()
        return state.withLock { s in
            s.sweep(now: t, lifetime: lifetime, budget: Self.sweepBudget)
            guard let e = s.entries[token] else { return nil }
            guard !e.expired(now: t, lifetime: lifetime) else {
                s.remove(token)
                return nil
            }
            s.entries[token]?.lastUsed = t
            return e.inbox
        }
    }

    /// A websocket opened with `token` for `inbox` begins: the token does not expire until ``release(_:)`` (put
    /// back if it was swept or evicted since the handshake resolved it).
    func hold(_ token: String, for inbox: NotificationHub.Inbox) {
        guard insert(token, for: inbox) else { return }
        state.withLock { $0.entries[token]?.held += 1 }
    }

    /// The websocket ``hold(_:for:)`` began has closed: a use of the token now.
    func release(_ token: String) {
        let t = now()
        state.withLock { s in
            guard let e = s.entries[token], e.held > 0 else { return }  // evicted (and maybe re-added) meanwhile
            s.entries[token]?.held -= 1
            s.entries[token]?.lastUsed = max(e.lastUsed, t)
        }
    }

    /// Websockets holding `token` open (``hold(_:for:)``).
    func holders(_ token: String) -> Int { state.withLock { $0.entries[token]?.held ?? 0 } }

    /// Live tokens in the table (expired ones not yet swept included).
    var count: Int { state.withLock { $0.entries.count } }
}
