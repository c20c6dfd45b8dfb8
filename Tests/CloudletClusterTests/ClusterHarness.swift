import CloudletClient
import CloudletCore
import CloudletTestSupport
import CloudletWire
import Foundation
import Synchronization
import Testing

/// A real cluster on loopback for the tests: one etcd and `cloudlet serve --cluster` nodes as child processes, each
/// with its own store and a fixed free port (so that a node restarts where it was), started, SIGKILLed and
/// restarted by the test.
final class ClusterHarness: @unchecked Sendable {
    // `@unchecked Sendable`: `processes` is guarded by `lock`; the rest is immutable.
    let dir = TempDir("cluster")
    let etcd: EtcdProcess
    let names: [String]
    let ports: [String: Int]
    let leaseTTL: Int
    private let lock = NSLock()
    private var processes: [String: ChildProcess] = [:]
    let http: CurlTransport
    /// `ckAPIToken=…&ckWebAuthToken=…`, printed by the first leader.
    private(set) var auth = ""
    /// The admin credential the first leader prints (for `/cloudlet/metrics` and the console).
    private(set) var admin = ""

    /// Extra `serve` options of every node (`--ack leader`).
    let extraArguments: [String]

    init(nodes: Int = 3, leaseTTL: Int = 2, extraArguments: [String] = []) async throws {
        self.extraArguments = extraArguments
        etcd = try await EtcdProcess(directory: dir.sub("etcd"))
        names = (1...nodes).map { "n\($0)" }
        var ports: [String: Int] = [:]
        for n in names { ports[n] = try freeLoopbackPort() }
        self.ports = ports
        self.leaseTTL = leaseTTL
        var options = CurlTransport.Options()
        options.timeout = 20
        options.connectTimeout = 2
        http = CurlTransport(options: options)
    }

    func url(_ node: String) -> String { "http://127.0.0.1:\(ports[node]!)" }
    func store(_ node: String) -> String { dir.sub(node) }

    /// Starts every node (or those of `only`) and waits for the credentials the first leader prints.
    func startAll(only: [String]? = nil) async throws {
        for n in only ?? names { try await start(n) }
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let lines = lock.withLock { processes.values.flatMap(\.stdout) }
            func value(_ key: String) -> String? {
                lines.first { $0.contains(key) }.map { $0.components(separatedBy: key).last!.trimmingCharacters(in: .whitespaces) }
            }
            if let api = value("ckAPIToken:"), let web = value("ckWebAuthToken:") {
                auth = "ckAPIToken=\(api)&ckWebAuthToken=\(web)"
                admin = value("admin credential:") ?? ""
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ChildProcess.Failure(message: "no node printed the cluster's first credentials; \(diagnostics())")
    }

    /// `cloudlet serve --cluster …` for `node`.
    func serveArguments(_ node: String) -> [String] {
        [
            "serve", "--data", store(node), "--port", String(ports[node]!), "--cluster",
            etcd.url.replacingOccurrences(of: "http://", with: "etcd://"), "--node", node, "--lease-ttl", String(leaseTTL),
        ] + extraArguments
    }

    func start(_ node: String) async throws {
        let c = try ChildProcess(
try cloudletExecutable(), serveArguments(node))
        lock.withLock { processes[node] = c }
        _ = try await c.waitForLine(timeout: 60) { $0.hasPrefix("listening on ") }
    }

    /// Starts a node that is expected to stop by itself (a refusal): its exit status and standard error, or a
    /// failure if it still runs after `timeout` seconds (it is killed then).
    func startUntilExit(_ node: String, timeout: Double, environment: [String: String]? = nil) async throws -> (status: Int32, stderr: [String]) {
        let c = try ChildProcess(try cloudletExecutable(), serveArguments(node), environment: environment)
        let deadline = Date().addingTimeInterval(timeout)
        while c.process.isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        guard !c.process.isRunning else {
            await c.stop(SIGKILL)
            throw ChildProcess.Failure(message: "\(node) still runs after \(timeout) s; stderr: \(c.stderr.suffix(8))")
        }
        await c.waitForExit()
        return (c.process.terminationStatus, c.stderr)
    }

    /// Stops `node` with `signal` and waits for it to exit; returns its standard error.
    @discardableResult
    func kill(_ node: String, _ signal: Int32 = SIGKILL) async -> [String] {
        guard let c = lock.withLock({ processes.removeValue(forKey: node) }) else { return [] }
        await c.stop(signal)
        let cut = c.stderr.filter { $0.contains("a divergent suffix") }
        lock.withLock { truncationLines += cut }
        return c.stderr
    }

    /// What the node (running or stopped) has written to its standard error so far.
    func stderr(_ node: String) -> [String] { lock.withLock { processes[node]?.stderr ?? [] } }

    /// Lines of killed nodes saying they truncated a divergent suffix of their log and restarted.
    private(set) var truncationLines: [String] = []

    /// Sends `signal` to a node without forgetting it (SIGSTOP, SIGCONT).
    func signal(_ node: String, _ signal: Int32) {
        if let c = lock.withLock({ processes[node] }) { Foundation.kill(c.process.processIdentifier, signal) }
    }

    func stopAll(_ signal: Int32 = SIGTERM) async {
        for n in names { await kill(n, signal) }
    }

    /// Kills every node and etcd: for the end of a test that fails part-way.
    func abandon() async {
        await stopAll(SIGKILL)
        await etcd.stop()
    }

    var live: [String] { lock.withLock { names.filter { processes[$0] != nil } } }

    func diagnostics() -> String {
        lock.withLock {
            processes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.stderr.filter { !$0.contains(" POST ") }.suffix(8).joined(separator: "\n"))" }
                .joined(separator: "\n")
        }
    }

    deinit {
        for c in processes.values { c.stopBlocking(SIGKILL) }
    }

    // MARK: HTTP

    func post(_ node: String, _ path: String, _ body: String, query: String = "") async throws -> HTTPClientResponse {
        let q = auth + (query.isEmpty ? "" : "&" + query)
        return try await http.send(
            HTTPClientRequest(
                method: "POST", url: url(node) + "/database/1/iCloud.com.example.app/development/private/" + path + "?" + q,
                headers: [("Content-Type", "application/json")], body: Array(body.utf8)))
    }

    /// Saves a new record `name`; true when the write was acknowledged.
    func create(_ node: String, _ name: String, value: String, query: String = "") async -> (acked: Bool, response: HTTPClientResponse?) {
        let body = """
            {"operations":[{"operationType":"create","record":{"recordName":"\(name)","recordType":"Item","fields":{"v":{"value":"\(value)"}}}}]}
            """
        guard let r = try? await post(node, "records/modify", body, query: query) else { return (false, nil) }
        guard r.status == 200, let json = try? JSONParser.parse(r.body), let record = json["records"]?.arrayValue?.first,
            record["serverErrorCode"] == nil, record["recordName"]?.stringValue == name
        else {
            if ProcessInfo.processInfo.environment["CLOUDLET_CLUSTER_VERBOSE"] != nil {
                print("write \(name) on \(node): \(r.status) \(String(decoding: r.body.prefix(300), as: UTF8.self))")
            }
            return (false, r)
        }
        return (true, r)
    }

    /// ``create(_:_:value:query:)`` (value = name), retried as a client would for up to 10 s — writes in flight
    /// during a handover may be refused with SERVICE_UNAVAILABLE; true once acknowledged, else records an issue.
    func createRetrying(_ node: String, _ name: String) async throws -> Bool {
        for _ in 0..<100 {
            if await create(node, name, value: name).acked { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("\(name) was never acknowledged via \(node); \(diagnostics())")
        return false
    }

    /// The node's `/cloudlet/cluster/status`, or nil when it does not answer.
    func status(_ node: String) async -> JSONValue? {
        guard let r = try? await http.send(HTTPClientRequest(method: "GET", url: url(node) + "/cloudlet/cluster/status")),
            r.status == 200
        else { return nil }
        return try? JSONParser.parse(r.body)
    }

    /// The live node whose partition 0 says it leads, waiting for one (other than `not`) up to `timeout` seconds.
    func leader(not excluded: String? = nil, timeout: Double = 30) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            for n in live where n != excluded {
                if await status(n)?["partitions"]?.arrayValue?.first?["role"]?.stringValue == "leader" { return n }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ChildProcess.Failure(message: "no leader within \(timeout) s; \(diagnostics())")
    }

    /// Waits until, for every replicated log (partition 0 and the catalog), every node (of `among`, else all) is
    /// durable at the same LSN, and partition 0's leader has committed it.
    func waitConverged(timeout: Double = 60, logs: Int = 2, among: [String]? = nil) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        var last = ""
        let names = among ?? self.names
        while Date() < deadline {
            var ends: [String: [UInt64]] = [:]
            var committed: [String: UInt64] = [:]
            for n in names {
                for p in await status(n)?["partitions"]?.arrayValue ?? [] {
                    let log = p["partition"]?.serialized() ?? "?"
                    ends[log, default: []].append(UInt64(p["durableLSN"]?.int64Value ?? -1))
                    if p["role"]?.stringValue == "leader" { committed[log] = UInt64(p["committedLSN"]?.int64Value ?? 0) }
                }
            }
            last = "durable \(ends), committed \(committed)"
            // Partition 0 takes writes after every failover, so its leader has committed its end; the catalog's
            // leader may have written nothing of its own in its epoch (its older frames count once it does).
            if ends.count == logs, ends.values.allSatisfy({ $0.count == names.count && Set($0).count == 1 }),
                committed["0"] == ends["0"]?.first
            {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ChildProcess.Failure(message: "replicas did not converge within \(timeout) s: \(last); \(diagnostics())")
    }

    // MARK: Offline checks (nodes stopped)

    /// The names of the `Item` records in a stopped node's store (`cloudlet-tool dump`).
    func recordNames(_ node: String) async throws -> Set<String> {
        let r = try await ChildProcess.run(try builtExecutable("cloudlet-tool"), ["dump", "--data", store(node), "--type", "Item", "--json"])
        guard r.status == 0 else { throw ChildProcess.Failure(message: "dump \(node) failed: \(r.err.joined(separator: "\n"))") }
        return Set(r.out.compactMap { try? JSONValue.parse($0)["recordName"]?.stringValue })
    }

    /// A stopped node's content hash of its records (`cloudlet-tool hash --json`, the store digest).
    func contentHash(_ node: String) async throws -> String {
        let r = try await ChildProcess.run(try builtExecutable("cloudlet-tool"), ["hash", "--data", store(node), "--json"])
        guard r.status == 0, let json = try? JSONValue.parse(r.out.joined(separator: "\n")), let digest = json["store"]?.stringValue else {
            throw ChildProcess.Failure(message: "hash \(node) failed: \(r.out) \(r.err)")
        }
        return digest
    }
}
