import CloudletClient
import CloudletConcurrency
import Foundation
import Synchronization

/// The cluster's recovery workloads (issue 14): `catchup`, `failover`, `replication-lag`, each a group of its own
/// (no anchor runs them; `catchup` measures the disk in the same run).
enum ClusterRecovery {
    static let summaries = [
        (CatchupWorkload.listedName, CatchupWorkload.summary), (FailoverWorkload.listedName, FailoverWorkload.summary),
        (ReplicationLagWorkload.listedName, ReplicationLagWorkload.summary),
    ]

    /// The groups, or none (with a notice) when `cloudlet` or etcd is missing.
    static func groups(sizes s: WorkloadCatalog.Sizes) -> [[any Workload]] {
        if let missing = BenchCluster.missing("catchup, failover and replication-lag") {
            Console.error(missing)
            return []
        }
        let cloudlet = BenchCluster.findCloudlet()!
        return [
            [CatchupWorkload(records: s.catchupRecords, executable: cloudlet)],
            [FailoverWorkload(kills: s.failoverKills, executable: cloudlet)],
            [ReplicationLagWorkload(rate: s.lagRate, seconds: s.lagSeconds, executable: cloudlet)],
        ]
    }
}

/// `catchup` (issue 14): how fast a replica that lost its store catches up. Three `cloudlet serve --cluster` nodes
/// and etcd (real processes, loopback); node n3 is SIGKILLed and its directory removed; `records` records are loaded
/// through the leader (batches of 200, 8 writers; a majority of two acknowledges them); then n3 starts again, empty,
/// and the run times it from its start until it has every partition and the catalog durable through what the leader
/// had committed. records/s of the partition's records; the note gives the log bytes the leader holds, their rate,
/// and the disk's sequential write rate (`disk-seqwrite`'s method: 1 MiB writes, one fdatasync) for as many bytes,
/// measured in the same run. One run (the load dominates its time).
final class CatchupWorkload: Workload {
    static let listedName = "catchup"
    static let summary = "a replica that lost its store catches up from a 3-node cluster's leader (records/s, MB/s vs the disk)"
    let name = listedName
    let engine = "cloudlet-cluster"
    let role = EngineRole.subject
    let unit = "records/s"
    let latencyOf = "the whole catch-up (process start to durable through the leader's commits)"
    let singleRun = true

    let records: Int
    private let cluster: BenchCluster
    private var target: [String: Int] = [:]
    private var dir = ""

    init(records: Int, executable: String) {
        self.records = records
        cluster = BenchCluster(executable: executable, label: Self.listedName, connections: 8)
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        self.dir = dir
        try cluster.startCluster(nodes: 3, in: dir)
        let leader = try cluster.leader()
        let lost = leader == 2 ? 1 : 2
        cluster.kill(lost)
        try FileManager.default.removeItem(atPath: cluster.nodes[lost].data)
        Console.progress("catchup · loading \(records) records")
        try cluster.load(records, through: leader, prefix: "c")
        guard let view = cluster.status(leader) else { throw BenchError(.engine, "catchup: the leader does not answer") }
        target = Dictionary(uniqueKeysWithValues: view.map { ($0.name, $0.committedLSN) })
    }

    func run() throws -> RunMeasurement {
        let leader = try cluster.leader()
        let lost = cluster.nodes.indices.first { cluster.nodes[$0].process == nil }!
        let logBytes = Self.logBytes(under: cluster.nodes[leader].data)
        let clock = Stopwatch()
        try cluster.start(lost)
        try cluster.waitCaughtUp(lost, to: target, timeout: 1800, poll: 5_000)
        let seconds = clock.elapsed
        let disk = try DiskSequentialWorkload.writeRate(bytes: logBytes, in: dir)
        let rate = Double(logBytes) / 1e6 / seconds
        let note = String(
            format: "%.1f MB of log in %.2f s: %.0f MB/s, %.2f× the disk's sequential write (%.0f MB/s for as many bytes, same run)",
            Double(logBytes) / 1e6, seconds, rate, rate / disk, disk)
        return RunMeasurement(operations: Double(records), seconds: seconds, latencies: [seconds], note: note)
    }

    func tearDown() throws { cluster.stopAll() }

    /// Bytes of the log segments (`*.seg`) under a node's store: what a replica starting from nothing is sent.
    static func logBytes(under dir: String) -> Int {
        guard let walker = FileManager.default.enumerator(atPath: dir) else { return 0 }
        var total = 0
        for case let path as String in walker where path.hasSuffix(".seg") {
            let attributes = try? FileManager.default.attributesOfItem(atPath: dir + "/" + path)
            total += (attributes?[.size] as? Int) ?? 0
        }
        return total
    }
}

/// `failover` (issue 14): the leader of a 3-node cluster (`--lease-ttl 2`) is SIGKILLed under load, again and again;
/// for each kill, the time from the kill until a write sent after it is acknowledged (writers send single-record
/// writes to every node in turn: a follower forwards to the leader, so writes resume as soon as a new leader is
/// elected and fenced). After each kill the node starts again and catches up before the next. Latencies are those
/// outages (p50, p99 over `kills`); the median is shown as seconds per failover. Goal: within the lease TTL + 1 s.
final class FailoverWorkload: Workload {
    static let listedName = "failover"
    static let summary = "SIGKILL the leader of a 3-node cluster under load: time until writes succeed again"
    static let leaseTTL = 2
    let name = listedName
    let engine = "cloudlet-cluster"
    let role = EngineRole.subject
    let unit = "failovers/s"
    let metric = Metric.secondsPerOperation
    let latencyOf = "SIGKILL of the leader → first write sent after it acknowledged"
    let singleRun = true

    let kills: Int
    let writers = 4
    private let cluster: BenchCluster

    init(kills: Int, executable: String) {
        self.kills = kills
        cluster = BenchCluster(executable: executable, label: Self.listedName, connections: 4)
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        try cluster.startCluster(nodes: 3, in: dir, extra: ["--lease-ttl", String(Self.leaseTTL)])
    }

    /// What the writers share with the killer: when the last kill happened, and the first acknowledgement of a
    /// write sent after it.
    private final class Clock: Sendable {
        struct State {
            var killedAt: Double?
            var resumedAt: Double?
            var stop = false
            var acknowledged = 0
            var failed = 0
        }
        let state = Mutex(State())
        let stopwatch = Stopwatch()
        /// Seconds since the run began.
        func now() -> Double { stopwatch.elapsed }
    }

    func run() throws -> RunMeasurement {
        let clock = Clock()
        let urls = cluster.nodes.indices.map { cluster.modifyURL($0) }
        let http = cluster.http
        let writers = writers
        // The writers run for the whole run on threads of their own.
        let done = DispatchGroup()
        for w in 0..<writers {
            done.enter()
            let thread = Thread {
                var i = 0
                while !clock.state.withLock({ $0.stop }) {
                    let sent = clock.now()
                    let request = BenchCluster.createRequest(urls[(w + i) % urls.count], names: ["f\(w)-\(i)"])
                    i += 1
                    let r = try? ThreadBridge.wait { try await http.send(request) }
                    let now = clock.now()
                    clock.state.withLock { s in
                        guard let r, BenchCluster.succeeded(r) else {
                            s.failed += 1
                            return
                        }
                        s.acknowledged += 1
                        if let killed = s.killedAt, sent > killed, s.resumedAt == nil { s.resumedAt = now }
                    }
                    if r == nil || !BenchCluster.succeeded(r!) { usleep(10_000) }
                }
                done.leave()
            }
            thread.name = "failover-writer-\(w)"
            thread.start()
        }
        defer {
            clock.state.withLock { $0.stop = true }
            done.wait()
        }
        var outages: [Double] = []
        for k in 0..<kills {
            Console.progress("failover · kill \(k + 1)/\(kills)")
            usleep(500_000)  // load on the healthy cluster first
            let leader = try cluster.leader(timeout: 30)
            cluster.kill(leader)
            let killedAt = clock.now()
            clock.state.withLock {
                $0.killedAt = killedAt
                $0.resumedAt = nil
            }
            try cluster.waitUntil("writes acknowledged after kill \(k + 1)", timeout: 60, poll: 2_000) {
                clock.state.withLock { $0.resumedAt != nil }
            }
            outages.append(clock.state.withLock { $0.resumedAt! } - killedAt)
            try cluster.start(leader)
            let next = try cluster.leader(timeout: 30)
            try cluster.waitCaughtUp(leader, with: next, timeout: 120)
        }
        let s = clock.state.withLock { $0 }
        let sorted = outages.sorted()
        let note = String(
            format: "%d kills, lease TTL %d s: outage max %.2f s; %d writes acknowledged, %d refused or unanswered while no leader",
            kills, Self.leaseTTL, sorted.last ?? 0, s.acknowledged, s.failed)
        return RunMeasurement(operations: Double(kills), seconds: outages.reduce(0, +), latencies: outages, note: note)
    }

    func tearDown() throws { cluster.stopAll() }
}

/// `replication-lag` (issue 14): a steady `rate` records/s into a 3-node cluster for `seconds` (requests of `batch`
/// new records, paced, from 16 writers); for each request, the time from its acknowledgement (the leader's commit
/// position in `X-Cloudlet-Commit-Position`) until the slower follower has it durable (its
/// `/cloudlet/cluster/status`, polled every ~2 ms; 0 when it had it before the acknowledgement). Latencies are
/// those lags; the median is the record rate reached.
final class ReplicationLagWorkload: Workload {
    static let listedName = "replication-lag"
    static let summary = "a steady 5,000 records/s into a 3-node cluster: acknowledgement → the slower follower durable"
    let name = listedName
    let engine = "cloudlet-cluster"
    let role = EngineRole.subject
    let unit = "records/s"
    let latencyOf = "a write acknowledged → durable on both followers"
    let singleRun = true

    let rate: Int
    let seconds: Double
    let batch = 10
    let writers = 16
    private let cluster: BenchCluster

    init(rate: Int, seconds: Double, executable: String) {
        self.rate = rate
        self.seconds = seconds
        cluster = BenchCluster(executable: executable, label: Self.listedName, connections: 16)
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        try cluster.startCluster(nodes: 3, in: dir)
    }

    /// One follower's durable LSN of partition 0 over time, and when to stop sampling.
    private final class Samples: Sendable {
        let series: Mutex<[[(time: Double, lsn: Int)]]>
        let stop = Atomic<Bool>(false)
        let stopwatch = Stopwatch()
        init(followers: Int) { series = Mutex(Array(repeating: [], count: followers)) }
        /// Seconds since the run began.
        func now() -> Double { stopwatch.elapsed }
    }

    func run() throws -> RunMeasurement {
        let leader = try cluster.leader()
        let followers = cluster.nodes.indices.filter { $0 != leader }
        let url = cluster.modifyURL(leader)
        let http = cluster.http
        let samples = Samples(followers: followers.count)
        let sampler = DispatchGroup()
        for (k, f) in followers.enumerated() {
            sampler.enter()
            let cluster = cluster
            let thread = Thread {
                while !samples.stop.load(ordering: .relaxed) {
                    if let lsn = cluster.status(f)?.first(where: { $0.name == "0" })?.durableLSN {
                        let t = samples.now()
                        samples.series.withLock { $0[k].append((t, lsn)) }
                    }
                    usleep(2_000)
                }
                sampler.leave()
            }
            thread.name = "lag-sampler-\(k)"
            thread.start()
        }
        let (batch, writers) = (batch, writers)
        let requests = Int(Double(rate) * seconds) / batch
        let perWriter = requests / writers
        let interval = Double(writers * batch) / Double(rate)  // between one writer's requests
        let (elapsed, acks) = try WorkerThreads.run(count: writers) { w -> [(time: Double, lsn: Int)] in
            var out: [(time: Double, lsn: Int)] = []
            let offset = samples.now()
            for i in 0..<perWriter {
                let wait = offset + (Double(i) + Double(w) / Double(writers)) * interval - samples.now()
                if wait > 0 { usleep(UInt32(wait * 1e6)) }
                let names = (0..<batch).map { "l\(w)-\(i)-\($0)" }
                let r = try BenchCluster.send(
                    BenchCluster.createRequest(url, names: names), http, what: "replication-lag: request \(i) of writer \(w)")
                // `partition:LSN,…`: the records are in partition 0 (a store of one partition).
                guard let header = r.header("X-Cloudlet-Commit-Position"),
                    let zero = header.split(separator: ",").first(where: { $0.hasPrefix("0:") }),
                    let lsn = Int(zero.dropFirst(2))
                else { throw BenchError(.engine, "replication-lag: no commit position of partition 0 in the answer") }
                out.append((samples.now(), lsn))
            }
            return out
        }
        let all = acks.flatMap { $0 }
        let last = all.map(\.lsn).max() ?? 0
        defer {
            samples.stop.store(true, ordering: .relaxed)
            sampler.wait()
        }
        try cluster.waitUntil("both followers durable through LSN \(last)", timeout: 60, poll: 10_000) {
            samples.series.withLock { s in s.allSatisfy { ($0.last?.lsn ?? 0) >= last } }
        }
        let series = samples.series.withLock { $0 }
        // For each request: each follower's first sample at or past its LSN (samples are in LSN order: binary
        // search); the lag is the later of the two.
        let lags = all.map { ack -> Double in
            series.map { s -> Double in
                var (lo, hi) = (0, s.count)
                while lo < hi {
                    let mid = (lo + hi) / 2
                    if s[mid].lsn >= ack.lsn { hi = mid } else { lo = mid + 1 }
                }
                return lo < s.count ? max(0, s[lo].time - ack.time) : 0
            }.max() ?? 0
        }
        let note = String(
            format: "%d requests of %d records offered at %d records/s for %.0f s; followers sampled every ~2 ms (the lag's resolution)",
            perWriter * writers, batch, rate, seconds)
        return RunMeasurement(operations: Double(perWriter * writers * batch), seconds: elapsed, latencies: lags, note: note)
    }

    func tearDown() throws { cluster.stopAll() }
}
