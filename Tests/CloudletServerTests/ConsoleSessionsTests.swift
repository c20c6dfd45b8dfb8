import Foundation
import Synchronization
import Testing

@testable import CloudletServer

/// ``ConsoleSessions``: lifetime, sign-out, revocation and the capacity bound, on a clock the test moves.
@Suite struct ConsoleSessionsTests {
    final class Clock: Sendable {
        let seconds = Mutex<Double>(1_000_000)
        var now: Date { Date(timeIntervalSince1970: seconds.withLock { $0 }) }
        func advance(_ s: Double) { seconds.withLock { $0 += s } }
    }

    @Test func aSessionLastsItsLifetimeAndNoLonger() throws {
        let clock = Clock()
        let sessions = ConsoleSessions(now: { clock.now })
        let (id, session) = try sessions.create()
        #expect(sessions.session(id)?.csrfToken == session.csrfToken)
        clock.advance(ConsoleSessions.lifetime - 1)
        #expect(sessions.session(id) != nil)
        clock.advance(1)
        #expect(sessions.session(id) == nil)
    }

    @Test func signOutAndRevocationEndSessionsAndIDsAreNotGuessable() throws {
        let sessions = ConsoleSessions()
        let (a, sa) = try sessions.create()
        let (b, sb) = try sessions.create()
        #expect(a != b && sa.csrfToken != sb.csrfToken && a.count == 64)
        #expect(sessions.session(nil) == nil && sessions.session("") == nil && sessions.session(sa.csrfToken) == nil)
        sessions.remove(a)
        #expect(sessions.session(a) == nil && sessions.session(b) != nil)
        sessions.removeAll()
        #expect(sessions.session(b) == nil)
    }

    @Test func pastCapacityTheOldestSessionGoes() throws {
        let clock = Clock()
        let sessions = ConsoleSessions(now: { clock.now })
        var ids: [String] = []
        for _ in 0..<ConsoleSessions.capacity {
            ids.append(try sessions.create().id)
            clock.advance(1)
        }
        #expect(ids.allSatisfy { sessions.session($0) != nil })
        let newest = try sessions.create().id
        #expect(sessions.session(ids[0]) == nil)
        #expect(sessions.session(ids[1]) != nil && sessions.session(newest) != nil)
    }
}
