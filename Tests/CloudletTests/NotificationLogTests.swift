import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// The durable notification log: a client that reconnects after a restart with `after` = the last notification it
/// got receives what it missed, with no gap, unless that fell past retention; a crash between a commit and its
/// notification loses nothing.
@Suite struct NotificationLogTests {
    let dir = TempDir("notification-log")
    let zone = ZoneID(zoneName: "Inbox")

    func open(logSize: Int? = nil, retention: Double? = nil, inMemory: Int? = nil) async throws -> CloudletStore {
        var config = StoreConfiguration(durability: .os)
        if let logSize { config.notificationLogSize = logSize }
        if let retention { config.notificationRetention = retention }
        if let inMemory { config.notificationsInMemory = inMemory }
        return try await CloudletStore.open(at: dir.sub("store"), configuration: config)
    }

    /// Every notification of alice's after `after`, page by page (no wait).
    func all(_ store: CloudletStore, after: NotificationID?) async -> (notifications: [RecordNotification], gap: Bool, next: NotificationID) {
        var out: [RecordNotification] = []
        var position = after
        var gap = false
        while true {
            let b = await store.notifications(container: testContainer, user: "alice", after: position, limit: 200, wait: 0)
            gap = gap || b.gap
            out += b.notifications
            position = b.next
            if b.notifications.isEmpty { return (out, gap, b.next) }
        }
    }

    /// Waits (bounded) until alice's log holds `count` notifications after `after`.
    func waitFor(_ count: Int, _ store: CloudletStore, after: NotificationID?) async throws -> [RecordNotification] {
        for _ in 0..<500 {
            let got = await all(store, after: after).notifications
            if got.count >= count { return got }
            try await Task.sleep(for: .milliseconds(10))
        }
        return await all(store, after: after).notifications
    }

    @Test func aClientResumesAfterARestartWithItsLastIDAndNoGap() async throws {
        var store = try await open()
        var db = try store.container(testContainer).privateDatabase(user: "alice")
        try await db.createZone(zone)
        try await db.saveSubscription(Subscription(id: "inbox", kind: .zone(zone), desiredKeys: ["title"]))
        for i in 0..<5 { _ = try await db.save(note("n\(i)", zone: zone, title: "t\(i)")) }
        let first = try await waitFor(5, store, after: nil)
        #expect(first.map(\.recordID.recordName) == ["n0", "n1", "n2", "n3", "n4"])
        let seen = first[1].id   // the client got two, then lost its connection
        try await store.close()

        store = try await open()
        db = try store.container(testContainer).privateDatabase(user: "alice")
        let resumed = await all(store, after: seen)
        #expect(!resumed.gap)
        #expect(resumed.notifications == Array(first[2...]))   // the same IDs, fields and all
        #expect(resumed.notifications.first?.fields == ["title": "t2"])
        // New ones continue the same sequence.
        _ = try await db.save(note("n5", zone: zone))
        let more = try await waitFor(1, store, after: first.last!.id)
        #expect(more.map(\.recordID.recordName) == ["n5"])
        #expect(more[0].id.incarnation == seen.incarnation && more[0].id > first.last!.id)
        // A position from another log, or past the end of the retained ones, is still a gap.
        #expect(await store.notifications(container: testContainer, user: "alice", after: NotificationID(incarnation: 1, sequence: 3)).gap)
        try await store.close()
    }

    @Test func retentionDropsTheOldestAndAPositionBeforeThemIsAGap() async throws {
        // 256 KiB segments (the smallest), a 512 KiB log: a few thousand notifications roll over it.
        var store = try await open(logSize: 512 << 10)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        try await db.createZone(zone)
        try await db.saveSubscription(Subscription(id: "inbox", kind: .zone(zone), desiredKeys: ["title"]))
        _ = try await db.save(note("first", zone: zone))
        let start = try #require(try await waitFor(1, store, after: nil).first)
        // Titles that LZ4 cannot shrink much: about 1.5 MB of notifications in all.
        var rng = SeededRandom(seed: 5)
        for batch in 0..<40 {
            _ = try await db.modify((0..<100).map { i in
                let body = String((0..<300).map { _ in Character(UnicodeScalar(UInt8(33 + rng.next() % 90))) })
                return .forceReplace(note("r\(batch)-\(i)", zone: zone, title: body))
            })
        }
        // Every batch of the hub is durable before it is seen; the log is compacted on close at the latest.
        try await store.close()
        store = try await open(logSize: 512 << 10)
        let fromStart = await all(store, after: start.id)
        let gap = fromStart.gap
        #expect(gap, "the oldest notifications are past retention")
        let gapFromTheVeryStart = await all(store, after: nil).gap
        #expect(gapFromTheVeryStart, "a read from the start must say the oldest are past retention")
        let log = try #require(store.notificationLog)
        let bytes = log.log.segments().reduce(UInt64(0)) { $0 + $1.size }
        #expect(bytes <= UInt64(512 << 10) + UInt64(log.log.configuration.segmentSize), "\(bytes) bytes kept")
        // The newest are all there, contiguous, and a client positioned among them has no gap.
        let kept = fromStart.notifications
        #expect(kept.last?.recordID.recordName == "r39-99")
        #expect(kept.count < 4001 && kept.count > 100, "\(kept.count) kept")
        #expect(kept.map(\.id.sequence) == Array(kept[0].id.sequence...(kept[0].id.sequence + UInt64(kept.count) - 1)))
        let resumed = await all(store, after: kept[kept.count - 50].id)
        let (resumedGap, resumedCount) = (resumed.gap, resumed.notifications.count)
        #expect(!resumedGap && resumedCount == 49)
        try await store.close()
    }

    @Test func aReadFromTheStartIsAGapOnceOlderNotificationsWereTrimmedFromMemory() async throws {
        let store = try await open(inMemory: 3)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        try await db.createZone(zone)
        try await db.saveSubscription(Subscription(id: "inbox", kind: .zone(zone)))
        for i in 0..<3 { _ = try await db.save(note("n\(i)", zone: zone)) }
        // Three fit: from the start is every one of them, with no gap.
        let whole = try await waitFor(3, store, after: nil)
        let first = await store.notifications(container: testContainer, user: "alice", after: nil)
        #expect(!first.gap)
        #expect(whole.map(\.recordID.recordName) == ["n0", "n1", "n2"])
        for i in 3..<5 { _ = try await db.save(note("n\(i)", zone: zone)) }
        _ = try await waitFor(2, store, after: whole.last!.id)
        // Two were trimmed: from the start, as from a position before them, the client learns it missed some.
        let fromStart = await store.notifications(container: testContainer, user: "alice", after: nil)
        let gapFromStart = fromStart.gap
        #expect(gapFromStart, "a read from the start does not say n0 and n1 were dropped")
        #expect(fromStart.notifications.map(\.recordID.recordName) == ["n2", "n3", "n4"])
        let fromFirst = await store.notifications(container: testContainer, user: "alice", after: whole[0].id)
        #expect(fromFirst.gap)
        let fromKept = await store.notifications(container: testContainer, user: "alice", after: whole[2].id)
        #expect(!fromKept.gap && fromKept.notifications.count == 2)
        try await store.close()
    }

    /// The writer (`cloudlet-crash-writer --mode notify`) is SIGKILLed while the hub runs behind it: after each
    /// reopen, every acknowledged save has its notification, once.
    @Test func aCrashBetweenACommitAndItsNotificationLosesNothing() async throws {
        let exe = try builtExecutable("cloudlet-crash-writer")
        let data = dir.sub("crash")
        var acked: Set<String> = []
        var recovered = 0
        var rng = SeededRandom(seed: 19)
        for round in 0..<4 {
            // The kill must fall while the writers still write (else the hub has caught up and there is no commit
            // left without its notification), however slowly this loop reads their output on a loaded machine: so
            // they may write up to 8 × 3,000 saves a round, and the store is reopened keeping every one in memory.
            // Round 0 kills itself where the hub has matched durable commits and not written their notifications
            // (`CLOUDLET_CRASH_AT`, the 20th such batch): that instant is hit every run, not only when a kill's timing
            // is lucky — on a fast machine the hub keeps up and a timed kill seldom finds it behind. The other rounds
            // are killed at a random moment.
            let crashAt = round == 0 ? ["CLOUDLET_CRASH_AT": "notifications.matched:20"] : [:]
            let child = try ChildProcess(
                exe, ["--data", data, "--prefix", "r\(round)", "--mode", "notify", "--writers", "8", "--max", "3000"],
                environment: ProcessInfo.processInfo.environment.merging(crashAt) { $1 })
            let target = Int.random(in: 100...600, using: &rng)
            let deadline = Date().addingTimeInterval(15)
            while (round == 0 || child.stdout.count < target + 1) && Date() < deadline && child.process.isRunning {
                try await Task.sleep(for: .milliseconds(2))
            }
            #expect(round > 0 || !child.process.isRunning, "round 0: the crash point was not reached in 15 s")
            await child.stop(SIGKILL)
            #expect(child.process.terminationReason == .uncaughtSignal, "round \(round): stderr: \(child.stderr)")
            for line in child.stdout {
                let parts = line.split(separator: " ").map(String.init)
                if parts.first == "ack" { acked.insert(parts[2]) }
            }
            var configuration = StoreConfiguration()
            configuration.notificationsInMemory = 200_000
            let store = try await CloudletStore.open(at: data, configuration: configuration)
            recovered += store.notificationHub.commitsRecovered.load(ordering: .relaxed)
            var names: [String] = []
            var position: NotificationID? = nil
            while true {
                let b = await store.notifications(container: "iCloud.com.example.crash", user: "crash", after: position, wait: 0)
                #expect(!b.gap)
                names += b.notifications.map(\.recordID.recordName)
                position = b.next
                if b.notifications.isEmpty { break }
            }
            let missing = acked.subtracting(names)
            #expect(missing.isEmpty, "round \(round): \(missing.count) acknowledged saves without a notification, e.g. \(missing.prefix(5))")
            #expect(names.count == Set(names).count, "round \(round): a notification twice")
            try await store.close()
        }
        #expect(acked.count > 300, "the writers acknowledged too little to test anything")
        #expect(recovered > 0, "no kill fell between a commit and its notification (round 0's crash point included)")
    }
}
