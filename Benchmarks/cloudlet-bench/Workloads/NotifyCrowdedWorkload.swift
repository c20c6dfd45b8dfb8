import Cloudlet
import CloudletConcurrency
import CloudletCore
import Foundation

/// `notify-crowded`: one user's single write and its notification, while another user has 10,000 query
/// subscriptions in the same public database (issue 19: one user's subscriptions must not slow everyone's
/// notifications). The crowd subscribes to 100 record types other than the one written (100 subscriptions each,
/// every one with its own predicate); the measured user has one query subscription to `Event` and saves one
/// `Event` at a time, waiting for its notification through the store's pull API (what the long-poll and the
/// websocket feed use) before the next. A sample is the time from issuing the save to the notification being
/// returned. Durability os, in process, no HTTP. No anchor (SQLite and RocksDB have no notifications).
final class NotifyCrowdedWorkload: Workload {
    let name = "notify-crowded"
    let engine = "cloudlet"
    let role = EngineRole.subject
    let unit = "notifications/s"
    let latencyOf = "one public save by another user → its notification returned"

    let crowd: Int
    let writes: Int
    private var store: CloudletStore?

    static let container = "iCloud.com.example.bench"

    init(crowd: Int, writes: Int) {
        self.crowd = crowd
        self.writes = writes
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        let crowd = self.crowd
        store = try ThreadBridge.wait { () async throws -> CloudletStore in
            var config = StoreConfiguration(durability: .os)
            config.subscriptionsPerUser = max(crowd, 1)
            let store = try await CloudletStore.open(at: dir + "/store", configuration: config)
            let heavy = try store.container(Self.container).publicDatabase(user: "_crowd")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in 0..<8 {
                    group.addTask {
                        for i in stride(from: w, to: crowd, by: 8) {
                            let predicate = Predicate.comparison(Comparison("n", .equals, .int64(Int64(i))))
                            try await heavy.saveSubscription(Subscription(
                                id: "watch-\(i)", kind: .query(recordType: "Watch\(i % 100)", predicate: predicate, zoneID: nil)))
                        }
                    }
                }
                try await group.waitForAll()
            }
            let light = try store.container(Self.container).publicDatabase(user: "_light")
            try await light.saveSubscription(Subscription(
                id: "events", kind: .query(recordType: "Event", predicate: .all, zoneID: nil), firesOn: [.create]))
            return store
        }
    }

    func run() throws -> RunMeasurement {
        guard let store else { preconditionFailure("run() without setUp()") }
        let writes = self.writes
        let clock = Stopwatch()
        let (latencies, missed) = try ThreadBridge.wait { () async throws -> ([Double], Int) in
            let db = try store.container(Self.container).publicDatabase(user: "_light")
            var after = await store.notifications(container: Self.container, user: "_light", after: nil, wait: 0).next
            var latencies: [Double] = []
            var missed = 0
            let budget = Stopwatch.now() + 60_000_000_000
            for i in 0..<writes where Stopwatch.now() < budget {
                let start = Stopwatch.now()
                _ = try await db.save(Record(recordType: "Event", recordName: "e\(UUID().uuidString)-\(i)", fields: ["i": .int64(Int64(i))]))
                var got = false
                let deadline = start + 10_000_000_000
                while !got && Stopwatch.now() < deadline {
                    let batch = await store.notifications(container: Self.container, user: "_light", after: after, wait: 10)
                    after = batch.next
                    got = !batch.notifications.isEmpty
                }
                if got { latencies.append(Double(Stopwatch.now() - start) / 1e9) } else { missed += 1 }
            }
            return (latencies, missed)
        }
        return RunMeasurement(
            operations: Double(latencies.count), seconds: clock.elapsed, latencies: latencies,
            note: latencies.count < writes
                ? "notify-crowded: \(writes - latencies.count) of \(writes) writes not notified (\(missed) waited 10 s; the rest not issued within the run's 60 s)"
                : nil)
    }

    func tearDown() throws {
        if let store { try ThreadBridge.wait { try await store.close() } }
        store = nil
    }
}
