import CloudletClient
import CloudletTestSupport
import Foundation
import Synchronization
import Testing

/// A measurement, not a benchmark of record (those belong in cloudlet-bench, next to etcd): 32 writers, one record
/// per commit, for `CLOUDLET_CLUSTER_BENCH` seconds, against one `cloudlet serve` and against the leader of a
/// 3-node `--ack quorum` cluster on the same machine. Off unless that variable is set.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["CLOUDLET_CLUSTER_BENCH"] != nil && EtcdProcess.isInstalled))
struct ClusterThroughputTests {
    static var seconds: Double { Double(ProcessInfo.processInfo.environment["CLOUDLET_CLUSTER_BENCH"] ?? "") ?? 10 }

    @Test func replicatedFillsyncConcurrentNextToOneNode() async throws {
        // One node: the same harness with one replica.
        let single = try await ClusterHarness(nodes: 1, extraArguments: ["--replicas", "1"])
        try await single.startAll()
        let one = try await Self.run(single, node: try await single.leader())
        await single.abandon()
        let cluster = try await ClusterHarness()
        try await cluster.startAll()
        let three = try await Self.run(cluster, node: try await cluster.leader())
        await cluster.abandon()
        print(
            "replicated-fillsync-concurrent (32 writers, \(Int(Self.seconds)) s): 3 nodes --ack quorum \(three.rate) records/s "
                + "(p50 \(three.p50) ms, p99 \(three.p99) ms); 1 node \(one.rate) records/s (p50 \(one.p50) ms, p99 \(one.p99) ms); "
                + "ratio \(String(format: "%.2f", Double(three.rate) / Double(max(one.rate, 1))))")
        #expect(one.rate > 0 && three.rate > 0)
    }

    struct Result {
        var rate: Int
        var p50: Int
        var p99: Int
    }

    static func run(_ cluster: ClusterHarness, node: String) async throws -> Result {
        let latencies = Latencies()
        let end = ContinuousClock.now + .seconds(seconds)
        await withTaskGroup(of: Void.self) { group in
            for w in 0..<32 {
                group.addTask {
                    var n = 0
                    while ContinuousClock.now < end {
                        let start = ContinuousClock.now
                        let (acked, _) = await cluster.create(node, "b\(w)-\(n)", value: "x")
                        n += 1
                        if acked { latencies.add(Double((ContinuousClock.now - start) / .microseconds(1)) / 1000) }
                    }
                }
            }
        }
        let sorted = latencies.all.sorted()
        guard !sorted.isEmpty else { return Result(rate: 0, p50: 0, p99: 0) }
        return Result(
            rate: Int(Double(sorted.count) / seconds), p50: Int(sorted[sorted.count / 2]),
            p99: Int(sorted[min(sorted.count - 1, sorted.count * 99 / 100)]))
    }
}

/// Latencies in ms, from many tasks.
final class Latencies: Sendable {
    private let values = Mutex<[Double]>([])
    func add(_ ms: Double) { values.withLock { $0.append(ms) } }
    var all: [Double] { values.withLock { $0 } }
}
