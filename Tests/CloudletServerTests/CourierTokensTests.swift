@testable import Cloudlet
import CloudletCore
import CloudletTestSupport
import Foundation
import Synchronization
import Testing

@testable import CloudletServer

/// Courier tokens expire after their lifetime since last use, a user's are capped (least recently used evicted), and
/// expired ones are swept with bounded work, never cutting a websocket or long-poll already open.
@Suite struct CourierTokensTests {
    /// A clock the test moves.
    final class ManualClock: Sendable {
        private let seconds = Mutex<Double>(0)
        func set(_ t: Double) { seconds.withLock { $0 = t } }
        var now: @Sendable () -> Double { { [self] in seconds.withLock { $0 } } }
    }

    static func inbox(_ user: String) -> NotificationHub.Inbox {
        NotificationHub.Inbox(container: LiveServer.container, environment: .development, user: user)
    }

    @Test func aTokenExpiresItsLifetimeAfterItsLastUseAndEachUseExtendsIt() {
        let clock = ManualClock()
        let tokens = CourierTokens(lifetime: 100, now: clock.now)
        #expect(tokens.insert("t", for: Self.inbox("a")))
        clock.set(90)
        #expect(tokens.use("t") == Self.inbox("a"))
        clock.set(180)  // 180 s after it was created, 90 after its last use
        #expect(tokens.use("t") == Self.inbox("a"))
        clock.set(280)  // exactly the lifetime after the last use: still valid
        #expect(tokens.use("t") == Self.inbox("a"))
        clock.set(380.5)
        #expect(tokens.use("t") == nil)
        #expect(tokens.count == 0)
        clock.set(381)
        #expect(tokens.use("t") == nil)
    }

    @Test func anExpiredTokenIsRefusedBeforeTheSweepReachesIt() {
        let clock = ManualClock()
        let tokens = CourierTokens(lifetime: 100, now: clock.now)
        let many = 4 * CourierTokens.sweepBudget
        for i in 0..<many { #expect(tokens.insert("t\(i)", for: Self.inbox("u\(i)"))) }
        clock.set(101)
        #expect(tokens.use("t\(many - 1)") == nil)  // queued last: the sweep of this call did not get to it
        #expect(tokens.count == many - CourierTokens.sweepBudget - 1)
    }

    @Test func aUsersTokensAreCappedAndTheLeastRecentlyUsedIsEvicted() {
        let clock = ManualClock()
        let tokens = CourierTokens(lifetime: 1000, perInboxCap: 3, now: clock.now)
        for (i, t) in ["a", "b", "c"].enumerated() {
            clock.set(Double(i))
            #expect(tokens.insert(t, for: Self.inbox("alice")))
        }
        #expect(tokens.insert("other", for: Self.inbox("bob")))
        clock.set(10)
        #expect(tokens.use("a") != nil)  // b is now the least recently used
        clock.set(11)
        #expect(tokens.insert("d", for: Self.inbox("alice")))
        #expect(tokens.use("b") == nil)
        for t in ["a", "c", "d"] { #expect(tokens.use(t) == Self.inbox("alice"), "\(t)") }
        #expect(tokens.use("other") == Self.inbox("bob"))  // another user's are not counted or evicted
        #expect(tokens.count == 4)
    }

    @Test func anotherUsersLiveTokenIsRefusedAndAnExpiredOneIsFree() {
        let clock = ManualClock()
        let tokens = CourierTokens(lifetime: 100, now: clock.now)
        #expect(tokens.insert("t", for: Self.inbox("alice")))
        #expect(!tokens.insert("t", for: Self.inbox("bob")))
        #expect(tokens.use("t") == Self.inbox("alice"))
        clock.set(201)
        #expect(tokens.insert("t", for: Self.inbox("bob")))
        #expect(tokens.use("t") == Self.inbox("bob"))
    }

    /// No call walks the table: each sweeps at most ``CourierTokens/sweepBudget`` expired tokens, and a token in use
    /// is kept.
    @Test func expiredTokensAreSweptAFewAtATimeAndUsedOnesAreKept() {
        let clock = ManualClock()
        let tokens = CourierTokens(lifetime: 10, now: clock.now)
        for i in 0..<100 { #expect(tokens.insert("t\(i)", for: Self.inbox("u\(i)"))) }
        clock.set(5)
        #expect(tokens.use("t0") != nil)  // used: due at 15
        clock.set(12)
        #expect(tokens.insert("new", for: Self.inbox("n")))
        // The sweep looked at the first sweepBudget tokens queued: t0 (used since, queued again) and 7 expired ones.
        #expect(tokens.count == 101 - (CourierTokens.sweepBudget - 1))
        for i in 0..<20 { _ = tokens.use("absent\(i)") }
        #expect(tokens.count == 2)  // t0 (used at 5) and new
        #expect(tokens.use("t0") != nil)
        #expect(tokens.use("t1") == nil)
    }

    /// Through the server: an expired token is answered as an unknown one on both endpoints (`AUTHENTICATION_FAILED`),
    /// and the long-poll opened with it before it expired and was swept still delivers.
    @Test func anExpiredTokenIsRefusedButAnOpenLongPollStillDelivers() async throws {
        let clock = ManualClock()
        let live = try await Self.start(lifetime: 100, clock)
        try await withCleanup({ await live.shutdown() }) {
            let (db, token) = try await Self.subscribedToken(live)
            try await FrontEndTests.onThread { c in
                let poll = try RawSocket(port: live.server.port)
                try poll.send("GET /cloudlet/notifications/poll?token=\(token)&timeout=60 HTTP/1.1\r\nHost: test\r\n\r\n")
                c.expect(NotificationDeliveryTests.eventually { NotificationDeliveryTests.waiters(live) == 1 }, "not waiting")
                // Expired, then swept by the next token created.
                clock.set(1000)
                c.expect(live.server.courier.tokens.count == 1)
                _ = try live.server.courierToken(container: LiveServer.container, environment: .development, user: "other")
                c.expect(live.server.courier.tokens.count == 1, "the expired token was not swept")
                try NotificationDeliveryTests.commitBlocking(live.store, db, "after-expiry")
                c.expect(poll.read(until: "after-expiry").contains("after-expiry"), "the open long-poll was cut")
                // New requests with the token are refused as for an unknown one.
                Self.expectRefused(token, live, c)
            }
        }
    }

    /// A token does not expire while a websocket opened with it is open, however long: a client reconnects with it
    /// after its lifetime has passed; its lifetime counts again from when the last such websocket closed.
    @Test func anOpenWebsocketKeepsItsTokenLiveUntilItCloses() async throws {
        let clock = ManualClock()
        let live = try await Self.start(lifetime: 100, clock)
        try await withCleanup({ await live.shutdown() }) {
            let (db, token) = try await Self.subscribedToken(live)
            let tokens = live.server.courier.tokens
            try await FrontEndTests.onThread { c in
                let ws = try RawSocket(port: live.server.port)
                let head = try ws.webSocketHandshake("/cloudlet/notifications/ws?token=\(token)")
                c.expect(head.hasPrefix("HTTP/1.1 101 "), "\(head)")
                c.expect(NotificationDeliveryTests.eventually { tokens.holders(token) == 1 }, "the websocket does not hold its token")
                // Ten lifetimes later, with sweeps in between: still live, so a second websocket opens with it.
                for t in stride(from: 150.0, through: 1000, by: 50) {
                    clock.set(t)
                    _ = try live.server.courierToken(container: LiveServer.container, environment: .development, user: "other\(t)")
                }
                c.expect(tokens.holders(token) == 1, "the held token was swept")
                let second = try RawSocket(port: live.server.port)
                let again = try second.webSocketHandshake("/cloudlet/notifications/ws?token=\(token)")
                c.expect(again.hasPrefix("HTTP/1.1 101 "), "a token held by an open websocket expired: \(again)")
                c.expect(NotificationDeliveryTests.eventually { tokens.holders(token) == 2 }, "the second websocket does not hold it")
                try NotificationDeliveryTests.commitBlocking(live.store, db, "while-held")
                c.expect(ws.read(until: "while-held").contains("while-held"), "the first websocket did not deliver")
                // Both close at t = 1000: the lifetime counts from there.
                shutdown(ws.fd, Int32(SHUT_RDWR))
                shutdown(second.fd, Int32(SHUT_RDWR))
                c.expect(NotificationDeliveryTests.eventually { tokens.holders(token) == 0 }, "the closed websockets still hold it")
                clock.set(1090)
                c.expect(tokens.use(token) != nil, "expired before its lifetime after the websockets closed")
                clock.set(1200)
                Self.expectRefused(token, live, c)
            }
        }
    }

    static func start(lifetime: Double, _ clock: ManualClock) async throws -> LiveServer {
        try await LiveServer.start { c in
            c.courierTokenLifetime = lifetime
            c.courierClock = clock.now
        }
    }

    /// A courier token of a user subscribed to a zone of theirs, and that user's private database.
    static func subscribedToken(_ live: LiveServer) async throws -> (Database, String) {
        let user = "pushee", zone = ZoneID(zoneName: "Pushed")
        let db = try live.store.container(LiveServer.container).privateDatabase(user: user)
        try await db.createZone(zone)
        try await db.saveSubscription(Subscription(id: "pushed", kind: .zone(zone)))
        return (db, try live.server.courierToken(container: LiveServer.container, environment: .development, user: user))
    }

    /// New long-polls and websockets with `token` are refused as for an unknown token.
    static func expectRefused(_ token: String, _ live: LiveServer, _ c: FrontEndTests.Checks) {
        do {
            let refusedPoll = try RawSocket(port: live.server.port)
            try refusedPoll.send("GET /cloudlet/notifications/poll?token=\(token)&timeout=0 HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            let answer = refusedPoll.readToEnd()
            c.expect(answer.hasPrefix("HTTP/1.1 401 ") && answer.contains("AUTHENTICATION_FAILED"), "\(answer)")
            c.expect(answer.contains("unknown or expired courier token"), "\(answer)")
            let refusedWS = try RawSocket(port: live.server.port)
            let refusal = try refusedWS.webSocketHandshake("/cloudlet/notifications/ws?token=\(token)")
            c.expect(refusal.hasPrefix("HTTP/1.1 401 "), "\(refusal)")
        } catch {
            c.expect(false, "\(error)")
        }
    }
}
