import CloudletClient
import CloudletConcurrency
import CloudletTestSupport
import Foundation

/// `replicated-fillsync-concurrent` (issue 14): 32 writers, each saving one new record per `records/modify` over HTTP
/// and waiting for the answer, against
/// - `cloudlet-cluster` (subject): three `cloudlet serve --cluster … --ack quorum` processes and one etcd for their
///   coordination, the writers sending to the leader (a write is acknowledged once two replicas fsynced it);
/// - `etcd` (anchor): a three-member etcd cluster, one `PUT /v3/kv/put` of the same bytes per request (acknowledged
///   once a majority fsynced it: the same guarantee);
/// - `cloudlet-1` (anchor): one `cloudlet serve`, no cluster (a write is acknowledged once it fsynced it).
/// Every process is real, on loopback, started fresh for each run. The `cloudlet` executable comes from
/// `$CLOUDLET_BIN`, else `.build/release/cloudlet` or `.build/debug/cloudlet` under the working directory; without it
/// (or without `/usr/bin/etcd`) the group is left out, saying so on stderr.
final class ReplicatedWorkload: Workload {
    enum Target: String, CaseIterable {
        case cluster = "cloudlet-cluster"
        case etcd
        case single = "cloudlet-1"
    }

    static let listedName = "replicated-fillsync-concurrent"
    static let summary =
        "32 HTTP writers, one record each: a 3-node --ack quorum cluster vs 3-member etcd and one cloudlet serve"
    let name = listedName
    let target: Target
    var engine: String { target.rawValue }
    var role: EngineRole { target == .cluster ? .subject : .anchor }
    let unit = "records/s"
    let latencyOf = "one record saved over HTTP and acknowledged"
    let singleRun: Bool

    let count: Int
    let writers: Int
    let executable: String
    private var processes: [ChildProcess] = []
    private var etcdMembers: [String] = []
    /// Where writes go, and the query string that authenticates them (Cloudlet) — or etcd's put URL.
    private var writeURL = ""
    private let http: CurlTransport

    init(target: Target, count: Int, writers: Int, executable: String, singleRun: Bool) {
        self.target = target
        self.count = count
        self.writers = writers
        self.executable = executable
        self.singleRun = singleRun
        var options = CurlTransport.Options()
        options.timeout = 30
        options.connectTimeout = 5
        options.maxIdleHandles = writers * 2
        http = CurlTransport(options: options)
    }

    /// The group, or nothing (with a notice) when `cloudlet` or etcd is missing.
    static func group(quick: Bool, sizes: WorkloadCatalog.Sizes) -> [any Workload] {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/etcd") else {
            Console.error("note: replicated-fillsync-concurrent left out: /usr/bin/etcd is not installed (.ci/install-deps)")
            return []
        }
        guard let cloudlet = findCloudlet() else {
            Console.error(
                "note: replicated-fillsync-concurrent left out: no cloudlet executable (set CLOUDLET_BIN, or build it: "
                    + "swift build -c release --product cloudlet)")
            return []
        }
        return Target.allCases.map {
            ReplicatedWorkload(
                target: $0, count: sizes.replicatedRecords, writers: sizes.writers, executable: cloudlet, singleRun: quick)
        }
    }

    static func findCloudlet() -> String? {
        let cwd = FileManager.default.currentDirectoryPath
        let candidates = [ProcessInfo.processInfo.environment["CLOUDLET_BIN"]].compactMap { $0 }
            + ["\(cwd)/.build/release/cloudlet", "\(cwd)/.build/debug/cloudlet", "\(cwd)/../.build/release/cloudlet"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        switch target {
        case .etcd:
            let members = try startEtcd(members: 3, in: dir)
            writeURL = members[0] + "/v3/kv/put"
        case .single:
            let port = try freeLoopbackPort()
            let node = try spawn(executable, ["serve", "--data", dir + "/node", "--port", String(port)])
            let auth = try credentials(from: [node])
            writeURL = "http://127.0.0.1:\(port)/database/1/iCloud.com.example.app/development/private/records/modify?\(auth)"
        case .cluster:
            let coordinator = try startEtcd(members: 1, in: dir)[0].replacingOccurrences(of: "http://", with: "etcd://")
            var nodes: [ChildProcess] = []
            var urls: [String] = []
            for n in 1...3 {
                let port = try freeLoopbackPort()
                urls.append("http://127.0.0.1:\(port)")
                nodes.append(
                    try spawn(
                        executable,
                        [
                            "serve", "--data", dir + "/n\(n)", "--port", String(port), "--cluster", coordinator, "--node", "n\(n)",
                            "--ack", "quorum",
                        ]))
            }
            let auth = try credentials(from: nodes)
            let leader = try findLeader(urls)
            writeURL = "\(leader)/database/1/iCloud.com.example.app/development/private/records/modify?\(auth)"
        }
    }

    func run() throws -> RunMeasurement {
        let url = writeURL
        let target = target
        let perWriter = max(count / writers, 1)
        let http = http
        // ~200 bytes of value, as the engine rows save.
        let text = String(repeating: "x", count: 180)
        let (seconds, latencies) = try WorkerThreads.run(count: writers) { w -> [Double] in
            var samples: [Double] = []
            samples.reserveCapacity(perWriter)
            for i in 0..<perWriter {
                let body: String
                switch target {
                case .etcd:
                    let key = Data("bench/w\(w)-\(i)".utf8).base64EncodedString()
                    let value = Data(#"{"n":\#(i),"text":"\#(text)"}"#.utf8).base64EncodedString()
                    body = #"{"key":"\#(key)","value":"\#(value)"}"#
                case .cluster, .single:
                    body = #"{"operations":[{"operationType":"create","record":{"recordName":"w\#(w)-\#(i)","recordType":"Item","fields":{"n":{"value":\#(i)},"text":{"value":"\#(text)"}}}}]}"#
                }
                let request = HTTPClientRequest(
                    method: "POST", url: url, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
                let clock = Stopwatch()
                let response = try ThreadBridge.wait { try await http.send(request) }
                guard response.status == 200, !response.body.contains(Array(#""serverErrorCode""#.utf8)) else {
                    throw BenchError(
                        .engine, "\(target.rawValue): write \(i) of writer \(w) answered \(response.status): "
                            + String(decoding: response.body.prefix(300), as: UTF8.self))
                }
                samples.append(clock.elapsed)
            }
            return samples
        }
        return RunMeasurement(operations: Double(perWriter * writers), seconds: seconds, latencies: latencies.flatMap { $0 })
    }

    func tearDown() throws {
        for p in processes { p.stopBlocking(SIGKILL) }
        processes = []
    }

    // MARK: Processes

    private func spawn(_ path: String, _ args: [String]) throws -> ChildProcess {
        let p = try ChildProcess(path, args)
        processes.append(p)
        return p
    }

    /// Starts an etcd cluster of `members` on free loopback ports; returns the client URLs once it serves.
    private func startEtcd(members: Int, in dir: String) throws -> [String] {
        let clients = try (0..<members).map { _ in "http://127.0.0.1:\(try freeLoopbackPort())" }
        let peers = try (0..<members).map { _ in "http://127.0.0.1:\(try freeLoopbackPort())" }
        let initial = (0..<members).map { "e\($0)=\(peers[$0])" }.joined(separator: ",")
        var started: [ChildProcess] = []
        for m in 0..<members {
            started.append(
                try spawn(
                    "/usr/bin/etcd",
                    [
                        "--name", "e\(m)", "--data-dir", dir + "/etcd\(m)", "--listen-client-urls", clients[m],
                        "--advertise-client-urls", clients[m], "--listen-peer-urls", peers[m],
                        "--initial-advertise-peer-urls", peers[m], "--initial-cluster", initial, "--initial-cluster-state", "new",
                        "--logger", "zap", "--log-level", "info",
                    ]))
        }
        try waitUntil("etcd serving clients", timeout: 90) {
            started.allSatisfy { p in p.stderr.contains { $0.contains("serving client traffic") } }
        }
        return clients
    }

    /// `ckAPIToken=…&ckWebAuthToken=…` as the (first leader) node printed them on its first start.
    private func credentials(from nodes: [ChildProcess]) throws -> String {
        var auth: String?
        try waitUntil("cloudlet printing its first credentials", timeout: 120) {
            let lines = nodes.flatMap(\.stdout)
            func value(_ key: String) -> String? {
                lines.first { $0.contains(key) }.map { $0.components(separatedBy: key).last!.trimmingCharacters(in: .whitespaces) }
            }
            if let api = value("ckAPIToken:"), let web = value("ckWebAuthToken:") { auth = "ckAPIToken=\(api)&ckWebAuthToken=\(web)" }
            return auth != nil
        }
        return auth!
    }

    /// The node whose `/cloudlet/cluster/status` says it leads partition 0 and the catalog.
    private func findLeader(_ urls: [String]) throws -> String {
        var leader: String?
        let http = http
        try waitUntil("a cluster leader", timeout: 60) {
            for url in urls {
                let request = HTTPClientRequest(method: "GET", url: url + "/cloudlet/cluster/status")
                guard let r = try? ThreadBridge.wait({ try await http.send(request) }), r.status == 200,
                    let json = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any],
                    let partitions = json["partitions"] as? [[String: Any]], !partitions.isEmpty,
                    partitions.allSatisfy({ $0["role"] as? String == "leader" })
                else { continue }
                leader = url
                return true
            }
            return false
        }
        return leader!
    }

    private func waitUntil(_ what: String, timeout: Double, _ done: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while try !done() {
            guard Date() < deadline else {
                let tail = processes.flatMap { $0.stderr.suffix(3) }.joined(separator: "\n")
                throw BenchError(.engine, "\(name) on \(engine): no \(what) within \(Int(timeout)) s; last lines:\n\(tail)")
            }
            usleep(50_000)
        }
    }
}
