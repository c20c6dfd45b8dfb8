import Cloudlet
import CloudletClient
import CloudletConcurrency
import CloudletCore
import CloudletServer
import CloudletSync
import Foundation

/// An in-process `cloudlet serve` over loopback with one user and `count` records of ~200 bytes in a custom zone
/// of the user's private database (durability os: the rows measure requests, not fsyncs).
final class ClientServer {
    static let container = "iCloud.com.example.bench"
    static let zone = ZoneID(zoneName: "Bench")
    let store: CloudletStore
    let server: Server
    let apiToken: String
    let webAuthToken: String

    init(in dir: String, records count: Int) throws {
        (store, server, apiToken, webAuthToken) = try ThreadBridge.wait {
            () async throws -> (CloudletStore, Server, String, String) in
            let store = try await CloudletStore.open(at: dir + "/server", configuration: StoreConfiguration(durability: .os))
            let credentials = Credentials(store: store)
            let api = try await credentials.createAPIToken(container: Self.container)
            let user = try await credentials.createUser(name: "bench")
            let db = try store.container(Self.container).privateDatabase(user: user.user.userRecordName)
            _ = try await db.createZone(Self.zone)
            var rng = SplitMix64(state: 42)
            for start in stride(from: 0, to: count, by: 200) {
                let ops = (start..<min(start + 200, count)).map { i in
                    RecordOperation.forceReplace(ClientServer.record(i, &rng))
                }
                for r in try await db.modify(ops, atomic: false) where r.error != nil { throw r.error! }
            }
            var config = ServerConfiguration()
            config.port = 0
            config.log = nil
            let server = try Server(store: store, configuration: config)
            try server.start()
            return (store, server, api, user.webAuthToken)
        }
    }

    static func record(_ i: Int, _ rng: inout SplitMix64) -> Record {
        var r = Record(recordType: "Item", recordName: "item-\(i)", zoneID: zone)
        r["n"] = .int64(Int64(i))
        r["text"] = .string(String((0..<180).map { _ in Character(Unicode.Scalar(UInt8(97 + rng.next() % 26))) }))
        return r
    }

    var client: CloudletClient {
        CloudletClient(url: server.url, apiToken: apiToken, webAuthToken: webAuthToken, configuration: .init(retry: .never))
    }

    /// `…/database/1/{container}/development/private/{operation}?ckAPIToken=…&ckWebAuthToken=…`.
    func url(_ operation: String) -> String {
        "\(server.url)/database/1/\(Self.container)/development/private/\(operation)?ckAPIToken=\(apiToken)&ckWebAuthToken=\(webAuthToken)"
    }

    func close() throws {
        server.stop()
        let store = self.store
        try ThreadBridge.wait { try await store.close() }
    }
}

/// `client-lookup`, `client-modify`: one record per request, one request at a time, through `CloudletClient`
/// (`RemoteDatabase.records(for:)` / `modify`: the request encoded from the model, the response decoded into
/// records) against the anchor `http-raw`: the same requests, prebuilt, through the same libcurl transport and
/// connection, with the response left unparsed. The ratio is what the client library costs per request on top
/// of HTTP itself (issue 18: under 10 %, i.e. a ratio over 0.9).
final class ClientRequestWorkload: Workload {
    enum Operation: String { case lookup, modify }

    let name: String
    let engine: String
    let role: EngineRole
    let unit = "requests/s"
    var latencyOf: String { "one \(operation == .lookup ? "records/lookup" : "records/modify") of one record" }

    let operation: Operation
    let raw: Bool
    let records: Int
    let requests: Int
    private var server: ClientServer?
    private var order: [Int] = []

    init(_ operation: Operation, raw: Bool, records: Int, requests: Int) {
        self.operation = operation
        self.raw = raw
        self.records = records
        self.requests = requests
        name = "client-\(operation.rawValue)"
        engine = raw ? "http-raw" : "cloudlet"
        role = raw ? .anchor : .subject
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        server = try ClientServer(in: dir, records: records)
        var rng = SplitMix64(state: 7)
        order = (0..<requests).map { _ in Int(rng.next() % UInt64(records)) }
    }

    func run() throws -> RunMeasurement {
        guard let server else { preconditionFailure("run() without setUp()") }
        let db = server.client.container(ClientServer.container).privateDatabase
        let transport = CurlTransport()
        let lookupURL = server.url("records/lookup"), modifyURL = server.url("records/modify")
        var rng = SplitMix64(state: 9)
        let (raw, operation, requests) = (self.raw, self.operation, self.requests)
        // Both paths get their bodies ready before the clock starts only where the raw path would: the raw one
        // prebuilds its bytes, the client encodes each request from records, as an application's call does.
        let rawBodies: [[UInt8]] = raw
            ? order.map { i in
                operation == .lookup
                    ? Array(#"{"records":[{"recordName":"item-\#(i)","zoneID":{"zoneName":"Bench"}}]}"#.utf8)
                    : Array(
                        #"{"operations":[{"operationType":"forceReplace","record":{"recordName":"item-\#(i)","recordType":"Item","fields":{"n":{"value":\#(i),"type":"INT64"},"text":{"value":"\#(String(repeating: "x", count: 180))","type":"STRING"}},"zoneID":{"zoneName":"Bench"}}}],"atomic":true}"#
                            .utf8)
            } : []
        let records = raw ? [] : order.map { ClientServer.record($0, &rng) }
        let (seconds, latencies) = try ThreadBridge.wait { () async throws -> (Double, [Double]) in
            var latencies: [Double] = []
            latencies.reserveCapacity(requests)
            let clock = Stopwatch()
            for k in 0..<requests {
                let t = Stopwatch()
                if raw {
                    let r = try await transport.send(
                        HTTPClientRequest(
                            method: "POST", url: operation == .lookup ? lookupURL : modifyURL,
                            headers: [("Content-Type", "application/json")], body: rawBodies[k]))
                    guard r.status == 200 else { throw BenchError(.io, "HTTP \(r.status): \(String(decoding: r.body.prefix(200), as: UTF8.self))") }
                } else if operation == .lookup {
                    _ = try await db.record(for: records[k].id)
                } else {
                    _ = try await db.save(records[k], policy: .allKeys)
                }
                latencies.append(t.elapsed)
            }
            return (clock.elapsed, latencies)
        }
        return RunMeasurement(operations: Double(requests), seconds: seconds, latencies: latencies)
    }

    func tearDown() throws {
        try server?.close()
        server = nil
    }
}

/// `sync-from-zero`: a new device's `SyncEngine` fetching a zone of `records` records from a server (database
/// feed, zone feed in pages of 200, each record written into the local store with its synced copy); records/s.
/// The anchor `http-feed` pages through the same change feed through `CloudletClient` without storing anything:
/// the ratio is what keeping the local copy costs. Compare with `changefeed` (the embedded feed, no HTTP).
final class SyncFromZeroWorkload: Workload {
    let name = "sync-from-zero"
    let engine: String
    let role: EngineRole
    let unit = "records/s"
    let latencyOf = "the whole sync (one sample a run)"

    let records: Int
    let feedOnly: Bool
    private var server: ClientServer?
    private var local: CloudletStore?
    private var dir = ""

    init(records: Int, feedOnly: Bool) {
        self.records = records
        self.feedOnly = feedOnly
        engine = feedOnly ? "http-feed" : "cloudlet"
        role = feedOnly ? .anchor : .subject
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        self.dir = dir
        server = try ClientServer(in: dir, records: records)
        local = try ThreadBridge.wait { try await CloudletStore.open(at: dir + "/device", configuration: StoreConfiguration(durability: .os)) }
    }

    func run() throws -> RunMeasurement {
        guard let server, let local else { preconditionFailure("run() without setUp()") }
        let remote = server.client.container(ClientServer.container).privateDatabase
        let feedOnly = self.feedOnly
        let (count, seconds) = try ThreadBridge.wait { () async throws -> (Int, Double) in
            let clock = Stopwatch()
            var count = 0
            if feedOnly {
                var token: ChangeToken?
                var more = true
                while more {
                    let page = try await remote.zoneChanges(ClientServer.zone, since: token)
                    count += page.changes.count
                    token = page.token
                    more = page.moreComing
                }
            } else {
                let engine = try await SyncEngine(
                    local: try local.container(ClientServer.container).privateDatabase(user: "device"), remote: remote)
                count = try await engine.fetchChanges().fetched
            }
            return (count, clock.elapsed)
        }
        guard count == records else { throw BenchError(.engine, "\(engine): synced \(count) records of \(records)") }
        return RunMeasurement(operations: Double(count), seconds: seconds, latencies: [seconds])
    }

    func tearDown() throws {
        try server?.close()
        if let local { try ThreadBridge.wait { try await local.close() } }
        (server, local) = (nil, nil)
    }
}

enum ClientWorkloads {
    static let summaries: [(name: String, summary: String)] = [
        ("client-lookup", "one-record lookups through CloudletClient vs the same requests raw over libcurl"),
        ("client-modify", "one-record saves through CloudletClient vs the same requests raw over libcurl"),
        ("sync-from-zero", "a new device's SyncEngine fetching a zone from a server vs paging its feed only"),
    ]

    static func groups(quick: Bool) -> [[any Workload]] {
        let (records, requests, syncRecords) = quick ? (1_000, 500, 5_000) : (10_000, 5_000, 100_000)
        let requestGroups: [[any Workload]] = [ClientRequestWorkload.Operation.lookup, .modify].map { op in
            [false, true].map { raw in ClientRequestWorkload(op, raw: raw, records: records, requests: requests) }
        }
        return requestGroups + [
            [SyncFromZeroWorkload(records: syncRecords, feedOnly: false), SyncFromZeroWorkload(records: syncRecords, feedOnly: true)]
        ]
    }
}
