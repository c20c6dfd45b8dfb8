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
    private let cluster: BenchCluster
    /// Where writes go, and the query string that authenticates them (Cloudlet) — or etcd's put URL.
    private var writeURL = ""
    private var http: CurlTransport { cluster.http }

    init(target: Target, count: Int, writers: Int, executable: String, singleRun: Bool) {
        self.target = target
        self.count = count
        self.writers = writers
        self.singleRun = singleRun
        cluster = BenchCluster(executable: executable, label: "\(Self.listedName) on \(target.rawValue)", connections: writers)
    }

    /// The group, or nothing (with a notice) when `cloudlet` or etcd is missing.
    static func group(quick: Bool, sizes: WorkloadCatalog.Sizes) -> [any Workload] {
        if let missing = BenchCluster.missing(listedName) {
            Console.error(missing)
            return []
        }
        return Target.allCases.map {
            ReplicatedWorkload(
                target: $0, count: sizes.replicatedRecords, writers: sizes.writers, executable: BenchCluster.findCloudlet()!,
                singleRun: quick)
        }
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        switch target {
        case .etcd:
            writeURL = try cluster.startEtcd(members: 3, in: dir)[0] + "/v3/kv/put"
        case .single:
            _ = try cluster.startSingle(in: dir)
            writeURL = cluster.modifyURL(0)
        case .cluster:
            try cluster.startCluster(nodes: 3, in: dir)
            writeURL = cluster.modifyURL(try cluster.leader())
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

    func tearDown() throws { cluster.stopAll() }
}
