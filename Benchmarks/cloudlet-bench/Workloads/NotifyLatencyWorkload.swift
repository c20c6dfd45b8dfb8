import CCivetweb
import Cloudlet
import CloudletConcurrency
import CloudletServer
import Foundation
import Synchronization

/// `notify-1k`, `notify-10k`: the delay from a commit to its notification reaching a connected websocket client,
/// with commits paced at 1,000 and 10,000 per second. An in-process `cloudlet serve` (durability os, so the disk's
/// sync rate does not cap the commit rate), a zone subscription, and a websocket client on
/// `/cloudlet/notifications/ws`; 8 writer tasks share the rate. A sample is the time from issuing a save to the
/// client receiving its notification (so it includes the commit itself). Throughput: notifications received/s.
/// There is no anchor for this one (SQLite and RocksDB have no notifications).
final class NotifyLatencyWorkload: Workload {
    let name: String
    let engine = "cloudlet"
    let role = EngineRole.subject
    let unit = "notifications/s"
    let latencyOf = "commit issued → its notification received on a websocket"

    let rate: Int
    let seconds: Double
    private var store: CloudletStore?
    private var server: Server?
    private var courierToken = ""
    private var db: Database?

    init(rate: Int, seconds: Double) {
        self.rate = rate
        self.seconds = seconds
        name = rate >= 1000 ? "notify-\(rate / 1000)k" : "notify-\(rate)"
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        let (store, server, token, db) = try ThreadBridge.wait { () async throws -> (CloudletStore, Server, String, Database) in
            let store = try await CloudletStore.open(at: dir + "/store", configuration: StoreConfiguration(durability: .os))
            let credentials = Credentials(store: store)
            _ = try await credentials.createAPIToken(container: "iCloud.com.example.bench")
            let user = try await credentials.createUser(name: "bench").user
            let db = try store.container("iCloud.com.example.bench").privateDatabase(user: user.userRecordName)
            let zone = ZoneID(zoneName: "Notify")
            try await db.createZone(zone)
            try await db.saveSubscription(Subscription(id: "all", kind: .zone(zone)))
            var config = ServerConfiguration()
            config.port = 0
            let server = try Server(store: store, configuration: config)
            try server.start()
            let token = try server.courierToken(container: "iCloud.com.example.bench", environment: .development, user: user.userRecordName)
            return (store, server, token, db)
        }
        (self.store, self.server, self.courierToken, self.db) = (store, server, token, db)
    }

    func run() throws -> RunMeasurement {
        guard let server, let db else { preconditionFailure("run() without setUp()") }
        let total = max(Int(Double(rate) * seconds), 1)
        let issued = IssueTimes(count: total)
        let client = try LatencyWebSocketClient(port: server.port, path: "/cloudlet/notifications/ws?token=\(courierToken)", expected: total)
        defer { client.close() }
        let writers = 8
        let interval = Double(writers) / Double(rate)
        let clock = Stopwatch()
        try ThreadBridge.wait {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in 0..<writers {
                    group.addTask {
                        let start = ContinuousClock.now
                        var k = 0
                        for i in stride(from: w, to: total, by: writers) {
                            let due = start + .nanoseconds(Int64(Double(k) * interval * 1e9))
                            k += 1
                            if due > .now { try await Task.sleep(until: due, clock: .continuous) }
                            issued.times.withLock { $0[i] = Stopwatch.now() }
                            let r = Record(recordType: "Event", recordName: "e\(i)", zoneID: ZoneID(zoneName: "Notify"), fields: ["i": .int64(Int64(i))])
                            _ = try await db.modify([.forceReplace(r)])
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        let received = client.waitForAll(timeout: 10)
        let elapsed = clock.elapsed
        let sent = issued.times.withLock { $0 }
        var latencies: [Double] = []
        for (i, at) in received where i < sent.count && sent[i] > 0 && at >= sent[i] {
            latencies.append(Double(at - sent[i]) / 1e9)
        }
        return RunMeasurement(
            operations: Double(received.count), seconds: elapsed, latencies: latencies,
            note: received.count < total ? "\(name): \(total - received.count) of \(total) notifications not received within 10 s" : nil)
    }

    func tearDown() throws {
        server?.stop()
        if let store { try ThreadBridge.wait { try await store.close() } }
        (server, store, db) = (nil, nil, nil)
    }

}

/// When each commit was issued, shared by the writer tasks.
final class IssueTimes: Sendable {
    let times: Mutex<[UInt64]>
    init(count: Int) { times = Mutex([UInt64](repeating: 0, count: count)) }
}

/// A websocket client that timestamps each notification by the record it names (`"recordName":"e<i>"`).
/// `@unchecked Sendable`: `state` is a Mutex; `connection` is set once in init.
final class LatencyWebSocketClient: @unchecked Sendable {
    let state = Mutex<[Int: UInt64]>([:])
    let expected: Int
    private var connection: OpaquePointer?

    init(port: Int, path: String, expected: Int) throws {
        self.expected = expected
        var error = [CChar](repeating: 0, count: 256)
        let me = Unmanaged.passUnretained(self).toOpaque()
        connection = error.withUnsafeMutableBufferPointer { buf in
            mg_connect_websocket_client("127.0.0.1", Int32(port), 0, buf.baseAddress, buf.count, path, nil, latencyData, nil, me)
        }
        guard connection != nil else { throw BenchError(.engine, "websocket connect failed") }
    }

    fileprivate func received(_ bytes: UnsafeRawBufferPointer) {
        let now = Stopwatch.now()
        let marker = Array(#""recordName":"e"#.utf8)
        guard let start = bytes.firstRange(of: marker)?.upperBound else { return }
        var i = 0
        var p = start
        while p < bytes.count, bytes[p] >= 0x30, bytes[p] <= 0x39 {
            i = i * 10 + Int(bytes[p] - 0x30)
            p += 1
        }
        state.withLock { if $0[i] == nil { $0[i] = now } }
    }

    func waitForAll(timeout: Double) -> [Int: UInt64] {
        let deadline = Date().addingTimeInterval(timeout)
        while state.withLock({ $0.count }) < expected && Date() < deadline { usleep(2_000) }
        return state.withLock { $0 }
    }

    func close() {
        guard let c = connection else { return }
        connection = nil
        _ = mg_websocket_client_write(c, Int32(MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE), nil, 0)
        mg_close_connection(c)
    }
}

private let latencyData: mg_websocket_data_handler = { _, bits, data, length, user in
    guard let user, let data else { return 1 }
    if (Int(bits) & 0x0F) == Int(MG_WEBSOCKET_OPCODE_TEXT) {
        Unmanaged<LatencyWebSocketClient>.fromOpaque(user).takeUnretainedValue()
            .received(UnsafeRawBufferPointer(start: data, count: length))
    }
    return 1
}
