@testable import Cloudlet
import CloudletConcurrency
import CloudletCore
import CloudletTestSupport
import Foundation
import Synchronization
import Testing

@testable import CloudletServer

/// How notification websockets and long polls are run: on an executor of their own (a blocked cooperative pool does
/// not hold back a push), waiting with no periodic wake-up, and released as soon as their client goes.
@Suite struct NotificationDeliveryTests {
    static let user = "pushee"
    static let zone = ZoneID(zoneName: "Pushed")

    /// A server whose store has a zone subscription for ``user``, and a courier token for its notifications.
    static func serve() async throws -> (live: LiveServer, token: String, db: Database) {
        let live = try await LiveServer.start()
        let db = try live.store.container(LiveServer.container).privateDatabase(user: user)
        try await db.createZone(zone)
        try await db.saveSubscription(Subscription(id: "pushed", kind: .zone(zone)))
        let token = try live.server.courierToken(container: LiveServer.container, environment: .development, user: user)
        return (live, token, db)
    }

    /// Runs `body` against a fresh ``serve()``, then shuts the server down.
    static func withServer(_ body: (LiveServer, String, Database) async throws -> Void) async throws {
        let (live, token, db) = try await serve()
        do {
            try await body(live, token, db)
        } catch {
            await live.shutdown()
            throw error
        }
        await live.shutdown()
    }

    /// Readers waiting in the store's notification hub (long polls, pushers with nothing to send).
    static func waiters(_ live: LiveServer) -> Int { live.store.statistics.notificationWaiters }

    /// Polls (bounded: the limit only ends a failing test) until `condition` holds; whether it did.
    static func eventually(seconds: Double = 20, _ condition: () -> Bool) -> Bool {
        PoolBlocker.eventually(seconds: seconds, condition)
    }

    /// Saves a record from a thread of its own (which may block); `done` is signalled when the save returned.
    static func saveOnThread(_ db: Database, _ name: String, done: DispatchSemaphore) {
        Thread.detachNewThread {
            _ = try? ThreadBridge.wait { try await db.save(Record(recordType: "Note", recordName: name, zoneID: zone)) }
            done.signal()
        }
    }

    /// Saves a record with the partition's blocking commit, on the calling thread (which may block), and waits for
    /// it to be durable: no task and no cooperative thread is involved (the async API's save may suspend on its way
    /// to the commit, and then goes on on the pool).
    static func commitBlocking(_ store: CloudletStore, _ db: Database, _ name: String) throws {
        let key = try db.key(zone)
        let partition = store.partition(for: key)
        let (_, lsn) = try partition.commit { _, lsn in
            var r = Record(recordType: "Note", recordName: name, zoneID: zone)
            r.changeTag = ChangeTag.make(lsn: lsn, index: 0)
            r.created = RecordStamp(timestamp: Int64(Date().timeIntervalSince1970 * 1000), userRecordName: user, deviceID: "test")
            r.modified = r.created
            return ([Mutation.putRecord(zone: key, record: r, encoded: RecordCodec.encode(r))], ())
        }
        if let lsn { try partition.log.waitDurableBlocking(lsn) }
    }

    @Test func aPushArrivesWhileEveryThreadOfTheCooperativePoolIsBlocked() async throws {
        try await Self.withServer { live, token, db in
            try await FrontEndTests.onThread { c in
                let ws = try RawSocket(port: live.server.port)
                let head = try ws.webSocketHandshake("/cloudlet/notifications/ws?token=\(token)")
                c.expect(head.hasPrefix("HTTP/1.1 101 "), "\(head)")
                c.expect(Self.eventually { Self.waiters(live) == 1 }, "the pusher never waited")
                let pool = PoolBlocker()
                defer { pool.release() }
                c.expect(pool.saturate(), "could not saturate the cooperative pool with \(pool.blockers) blocking tasks")
                let jobsBefore = DedicatedExecutor.push.jobsRun
                // Made durable and handed to the hub without the pool (by the committer's thread).
                try Self.commitBlocking(live.store, db, "while-blocked")
                let pushed = ws.read(until: "while-blocked")
                let stillBlocked = pool.stillBlocked
                let state = "commits \(live.store.statistics.commits), "
                    + "batches matched \(live.store.notificationHub.batchesMatched.load(ordering: .relaxed)), "
                    + "waiters \(Self.waiters(live)), push jobs \(DedicatedExecutor.push.jobsRun - jobsBefore), blockers \(pool.blockers)"
                c.expect(pushed.contains("while-blocked"), "no push arrived: \(pushed.utf8.count) bytes; \(state)")
                c.expect(stillBlocked, "the pool was released before the push arrived")
            }
        }
    }

    @Test func anIdleWebsocketFeedDoesNotWakeUpAndStillDeliversAndNoticesItsClose() async throws {
        try await Self.withServer { live, token, db in
            try await FrontEndTests.onThread { c in
                let ws = try RawSocket(port: live.server.port)
                let head = try ws.webSocketHandshake("/cloudlet/notifications/ws?token=\(token)")
                c.expect(head.hasPrefix("HTTP/1.1 101 "), "\(head)")
                c.expect(Self.eventually { Self.waiters(live) == 1 }, "the pusher never waited")
                let before = live.server.metrics.idleWakeupCount
                // Idle for 1.5 s: a pusher that re-waited every 0.25 s would have woken 6 times.
                usleep(1_500_000)
                let wakeups = live.server.metrics.idleWakeupCount - before
                c.expect(wakeups == 0, "\(wakeups) idle wake-ups")
                c.expect(Self.waiters(live) == 1, "the pusher stopped waiting")
                let saved = DispatchSemaphore(value: 0)
                Self.saveOnThread(db, "after-idle", done: saved)
                _ = saved.wait(timeout: .now() + 60)
                let pushed = ws.read(until: "after-idle")
                c.expect(pushed.contains("after-idle"), "no push arrived after the idle period")
                c.expect(Self.eventually { Self.waiters(live) == 1 }, "the pusher did not wait again")
                // The client goes: the pusher ends without a notification to wake it.
                shutdown(ws.fd, Int32(SHUT_RDWR))
                c.expect(Self.eventually { Self.waiters(live) == 0 }, "the pusher still waits after its client left")
                let metrics = live.server.metrics.render(store: live.store.statistics)
                c.expect(metrics.contains("cloudlet_notification_waiters 0"), "\(metrics)")
            }
        }
    }

    @Test(arguments: [false, true])
    func aLongPollWhoseClientLeavesIsReleasedBeforeItsTimeout(halfClose: Bool) async throws {
        try await Self.withServer { live, token, _ in
            try await FrontEndTests.onThread { c in
                let poll = try RawSocket(port: live.server.port)
                try poll.send("GET /cloudlet/notifications/poll?token=\(token)&timeout=60 HTTP/1.1\r\nHost: test\r\n\r\n")
                c.expect(Self.eventually { Self.waiters(live) == 1 }, "the long poll never waited")
                // A client that half-closes still gets its (empty) answer at once; one that closes gets nothing. Either
                // way the wait ends now, not 60 s later (the bound below is a third of that, only to end a failure).
                shutdown(poll.fd, Int32(halfClose ? SHUT_WR : SHUT_RDWR))
                c.expect(Self.eventually { Self.waiters(live) == 0 }, "the long poll still waits after its client left")
                if halfClose {
                    let answer = poll.readToEnd()
                    c.expect(answer.hasPrefix("HTTP/1.1 200 ") && answer.contains(#""notifications""#), "\(answer)")
                }
                // The request was answered (and counted), so no request is in flight but the metrics one.
                c.expect(Self.eventually { live.server.metrics.render(store: live.store.statistics).contains("cloudlet_http_requests_in_flight 0") })
            }
        }
    }

    @Test func longPollsOneAfterAnotherOnAKeepAliveConnectionEachWaitForTheirOwnAnswer() async throws {
        try await Self.withServer { live, token, db in
            try await FrontEndTests.onThread { c in
                let s = try RawSocket(port: live.server.port)
                // The first ends at its timeout; the second, on the same connection, waits for the save.
                try s.send("GET /cloudlet/notifications/poll?token=\(token)&timeout=0.1 HTTP/1.1\r\nHost: test\r\n\r\n")
                let first = s.read(until: "\"gap\"")
                c.expect(first.hasPrefix("HTTP/1.1 200 ") && first.contains(#""notifications":[]"#), "\(first)")
                try s.send("GET /cloudlet/notifications/poll?token=\(token)&timeout=60 HTTP/1.1\r\nHost: test\r\n\r\n")
                c.expect(Self.eventually { Self.waiters(live) == 1 }, "the second long poll did not wait")
                try Self.commitBlocking(live.store, db, "second-poll")
                let second = s.read(until: "second-poll")
                c.expect(second.contains("second-poll"), "\(second)")
            }
        }
    }
}
