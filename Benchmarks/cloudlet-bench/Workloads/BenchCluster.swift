import CloudletClient
import CloudletConcurrency
import CloudletTestSupport
import Foundation

/// Real processes for the cluster workloads (`replicated-fillsync-concurrent`, `catchup`, `failover`,
/// `replication-lag`): etcd members and `cloudlet serve` nodes on loopback ports, started fresh in a run's directory
/// and killed (SIGKILL) by ``stopAll()``.
///
/// `@unchecked Sendable`: the node table changes (``start(_:)``, ``kill(_:)``) only on the thread that runs the
/// workload; threads it starts only read nodes' addresses and status, which do not change while they run.
final class BenchCluster: @unchecked Sendable {
    /// One `cloudlet serve --cluster` node: its name, where it listens and keeps its store, and its process while up.
    struct Node {
        var name: String
        var port: Int
        var data: String
        var arguments: [String]
        var process: ChildProcess?
        var url: String { "http://127.0.0.1:\(port)" }
    }

    let executable: String
    let http: CurlTransport
    /// Which workload this serves, for error messages.
    let label: String
    private(set) var nodes: [Node] = []
    private var others: [ChildProcess] = []
    /// `ckAPIToken=…&ckWebAuthToken=…`, as the first node to create the store's credentials printed them.
    private(set) var auth = ""

    static let recordsPath = "/database/1/iCloud.com.example.app/development/private/records/modify"

    init(executable: String, label: String, connections: Int) {
        self.executable = executable
        self.label = label
        var options = CurlTransport.Options()
        options.timeout = 30
        options.connectTimeout = 5
        options.maxIdleHandles = connections * 2
        http = CurlTransport(options: options)
    }

    /// The `cloudlet` executable: `$CLOUDLET_BIN`, else `.build/release/cloudlet` or `.build/debug/cloudlet` under the
    /// working directory or its parent.
    static func findCloudlet() -> String? {
        let cwd = FileManager.default.currentDirectoryPath
        let candidates = [ProcessInfo.processInfo.environment["CLOUDLET_BIN"]].compactMap { $0 }
            + ["\(cwd)/.build/release/cloudlet", "\(cwd)/.build/debug/cloudlet", "\(cwd)/../.build/release/cloudlet"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Why a cluster workload cannot run here (etcd or `cloudlet` missing), or nil.
    static func missing(_ workload: String) -> String? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/etcd") else {
            return "note: \(workload) left out: /usr/bin/etcd is not installed (.ci/install-deps)"
        }
        guard findCloudlet() != nil else {
            return "note: \(workload) left out: no cloudlet executable (set CLOUDLET_BIN, or build it: "
                + "swift build -c release --product cloudlet)"
        }
        return nil
    }

    // MARK: Processes

    /// Starts an etcd cluster of `members` on free loopback ports; returns the client URLs once it serves.
    func startEtcd(members: Int, in dir: String) throws -> [String] {
        let clients = try (0..<members).map { _ in "http://127.0.0.1:\(try freeLoopbackPort())" }
        let peers = try (0..<members).map { _ in "http://127.0.0.1:\(try freeLoopbackPort())" }
        let initial = (0..<members).map { "e\($0)=\(peers[$0])" }.joined(separator: ",")
        var started: [ChildProcess] = []
        for m in 0..<members {
            let p = try ChildProcess(
                "/usr/bin/etcd",
                [
                    "--name", "e\(m)", "--data-dir", dir + "/etcd\(m)", "--listen-client-urls", clients[m],
                    "--advertise-client-urls", clients[m], "--listen-peer-urls", peers[m],
                    "--initial-advertise-peer-urls", peers[m], "--initial-cluster", initial, "--initial-cluster-state", "new",
                    "--logger", "zap", "--log-level", "info",
                ])
            others.append(p)
            started.append(p)
        }
        try waitUntil("etcd serving clients", timeout: 90) {
            started.allSatisfy { p in p.stderr.contains { $0.contains("serving client traffic") } }
        }
        return clients
    }

    /// One `cloudlet serve` without a cluster; returns its URL once it printed its credentials.
    func startSingle(in dir: String) throws -> String {
        let port = try freeLoopbackPort()
        nodes.append(Node(name: "single", port: port, data: dir + "/node", arguments: ["serve", "--data", dir + "/node", "--port", String(port)]))
        try start(0)
        try readCredentials()
        return nodes[0].url
    }

    /// etcd (one member: the coordinator) and `count` nodes `n1…` with `--ack quorum` and `extra` arguments; returns
    /// once they printed the store's credentials and one of them leads every partition.
    func startCluster(nodes count: Int, in dir: String, extra: [String] = []) throws {
        let coordinator = try startEtcd(members: 1, in: dir)[0].replacingOccurrences(of: "http://", with: "etcd://")
        for n in 1...count {
            let port = try freeLoopbackPort()
            let data = dir + "/n\(n)"
            nodes.append(
                Node(
                    name: "n\(n)", port: port, data: data,
                    arguments: [
                        "serve", "--data", data, "--port", String(port), "--cluster", coordinator, "--node", "n\(n)", "--ack", "quorum",
                    ] + extra))
            try start(n - 1)
        }
        try readCredentials()
        _ = try leader()
    }

    /// Starts node `i` (again), on its port and store.
    func start(_ i: Int) throws {
        nodes[i].process = try ChildProcess(executable, nodes[i].arguments)
    }

    /// SIGKILLs node `i` and waits for it to be gone.
    func kill(_ i: Int) {
        nodes[i].process?.stopBlocking(SIGKILL)
        nodes[i].process = nil
    }

    func stopAll() {
        for i in nodes.indices { kill(i) }
        for p in others { p.stopBlocking(SIGKILL) }
        nodes = []
        others = []
    }

    private func readCredentials() throws {
        var found: String?
        try waitUntil("cloudlet printing its first credentials", timeout: 120) {
            let lines = nodes.compactMap(\.process).flatMap(\.stdout)
            func value(_ key: String) -> String? {
                lines.first { $0.contains(key) }.map { $0.components(separatedBy: key).last!.trimmingCharacters(in: .whitespaces) }
            }
            if let api = value("ckAPIToken:"), let web = value("ckWebAuthToken:") { found = "ckAPIToken=\(api)&ckWebAuthToken=\(web)" }
            return found != nil
        }
        auth = found!
    }

    // MARK: Status

    /// One partition (or the catalog) as a node's `/cloudlet/cluster/status` shows it.
    struct PartitionView {
        var name: String
        var role: String
        var durableLSN: Int
        var committedLSN: Int
    }

    /// Node `i`'s view of its partitions; nil when it does not answer.
    func status(_ i: Int) -> [PartitionView]? {
        let request = HTTPClientRequest(method: "GET", url: nodes[i].url + "/cloudlet/cluster/status")
        let http = http
        guard let r = try? ThreadBridge.wait({ try await http.send(request) }), r.status == 200,
            let json = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any],
            let partitions = json["partitions"] as? [[String: Any]], !partitions.isEmpty
        else { return nil }
        return partitions.map { p in
            PartitionView(
                name: (p["partition"] as? String) ?? "\(p["partition"] as? Int ?? -1)", role: p["role"] as? String ?? "",
                durableLSN: p["durableLSN"] as? Int ?? 0, committedLSN: p["committedLSN"] as? Int ?? 0)
        }
    }

    /// The index of the node that leads every partition (one node leads them all: docs/replication.md), waiting up
    /// to `timeout` seconds for one.
    func leader(timeout: Double = 60) throws -> Int {
        var found: Int?
        try waitUntil("a cluster leader", timeout: timeout) {
            found = nodes.indices.first { i in
                nodes[i].process != nil && (status(i)?.allSatisfy { $0.role == "leader" } ?? false)
            }
            return found != nil
        }
        return found!
    }

    /// Waits until node `i` has every partition durable through what node `leader` has committed now.
    func waitCaughtUp(_ i: Int, with leader: Int, timeout: Double) throws {
        guard let target = status(leader) else {
            throw BenchError(.engine, "\(label): the leader \(nodes[leader].name) does not answer its status")
        }
        try waitCaughtUp(i, to: Dictionary(uniqueKeysWithValues: target.map { ($0.name, $0.committedLSN) }), timeout: timeout)
    }

    /// Waits until node `i` has every partition durable through `target` (partition name → LSN).
    func waitCaughtUp(_ i: Int, to target: [String: Int], timeout: Double, poll: UInt32 = 20_000) throws {
        try waitUntil("\(nodes[i].name) caught up", timeout: timeout, poll: poll) {
            guard let mine = status(i) else { return false }
            let have = Dictionary(uniqueKeysWithValues: mine.map { ($0.name, $0.durableLSN) })
            return target.allSatisfy { (have[$0.key] ?? -1) >= $0.value }
        }
    }

    // MARK: Writes

    /// `records/modify` on node `i`, authenticated (the base for ``createRequest(_:names:value:)``).
    func modifyURL(_ i: Int) -> String { "\(nodes[i].url)\(Self.recordsPath)?\(auth)" }

    /// A `records/modify` to `url` creating `names` (one `Item` record each, ~200 bytes of fields).
    static func createRequest(_ url: String, names: some Sequence<String>, value: Int = 0) -> HTTPClientRequest {
        let text = String(repeating: "x", count: 180)
        let ops = names.map {
            #"{"operationType":"create","record":{"recordName":"\#($0)","recordType":"Item","fields":{"n":{"value":\#(value)},"text":{"value":"\#(text)"}}}}"#
        }
        let body = #"{"operations":[\#(ops.joined(separator: ","))]}"#
        return HTTPClientRequest(
            method: "POST", url: url, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
    }

    /// Whether an answer to a modify is a success for every record in it.
    static func succeeded(_ r: HTTPClientResponse) -> Bool {
        r.status == 200 && !r.body.contains(Array(#""serverErrorCode""#.utf8))
    }

    /// Sends `request` through `http`, throwing with the answer (naming `what` for `label`) when it is not a success.
    static func send(_ request: HTTPClientRequest, _ http: CurlTransport, what: String) throws -> HTTPClientResponse {
        let r = try ThreadBridge.wait { try await http.send(request) }
        guard succeeded(r) else {
            throw BenchError(.engine, "\(what) answered \(r.status): " + String(decoding: r.body.prefix(300), as: UTF8.self))
        }
        return r
    }

    /// Loads `count` records (names `prefix0…`) through node `i` in requests of `batch`, from `writers` threads.
    func load(_ count: Int, through i: Int, prefix: String, batch: Int = 200, writers: Int = 8) throws {
        let batches = (count + batch - 1) / batch
        let (url, http, label) = (modifyURL(i), http, label)
        _ = try WorkerThreads.run(count: writers) { w -> Int in
            for b in stride(from: w, to: batches, by: writers) {
                let names = (b * batch..<min((b + 1) * batch, count)).map { "\(prefix)\($0)" }
                _ = try Self.send(Self.createRequest(url, names: names), http, what: "\(label): loading batch \(b)")
            }
            return 0
        }
    }

    func waitUntil(_ what: String, timeout: Double, poll: UInt32 = 50_000, _ done: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while try !done() {
            guard Date() < deadline else {
                let tail = (nodes.compactMap(\.process) + others).flatMap { $0.stderr.suffix(3) }.joined(separator: "\n")
                throw BenchError(.engine, "\(label): no \(what) within \(Int(timeout)) s; last lines:\n\(tail)")
            }
            usleep(poll)
        }
    }
}
