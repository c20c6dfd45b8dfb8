import CloudletConcurrency
import CloudletReplication
import Foundation
import Testing

/// Runs the deterministic simulation over many seeds. `CLOUDLET_SIM_SEEDS=<n>` runs n seeds instead of the default
/// (`make sim` runs thousands); `CLOUDLET_SIM_SEED=<s>` runs just seed s; `CLOUDLET_SIM_TRACE=<n>` shows the last n steps of a failure's trace.
@Suite("Replication simulation: seeded faults, invariants after every step")
struct ReplicationSimulationTests {
    static let environment = ProcessInfo.processInfo.environment
    /// `defaultCount` seeds, or what the environment asks for.
    static func seeds(_ defaultCount: UInt64) -> [UInt64] {
        if let one = environment["CLOUDLET_SIM_SEED"].flatMap(UInt64.init) { return [one] }
        let count = environment["CLOUDLET_SIM_SEEDS"].flatMap(UInt64.init) ?? defaultCount
        let first = environment["CLOUDLET_SIM_FIRST_SEED"].flatMap(UInt64.init) ?? 1
        return Array(first..<(first + count))
    }

    /// Runs the seeds on a thread of its own (ThreadBridge.offload): seconds of CPU on the cooperative pool — two
    /// threads here — would starve the other suites' tasks.
    private func runSeeds(_ options: SimulationOptions, label: String, seeds defaultCount: UInt64) async {
        let traceLength = Self.environment["CLOUDLET_SIM_TRACE"].flatMap(Int.init)
        let failures = await ThreadBridge.offload { () -> [String] in
            var failures: [String] = []
            for seed in Self.seeds(defaultCount) {
                let simulation = Simulation(seed: seed, options: options)
                if let traceLength { simulation.traceLength = traceLength }
                if let failure = simulation.run() {
                    failures.append(failure)
                    if failures.count >= 3 { break }
                }
            }
            return failures
        }
        for failure in failures {
            let seed = failure.split(separator: " ")[1]
            Issue.record(
                "\(failure)\nreproduce: CLOUDLET_SIM_SEED=\(seed) swift test --filter 'ReplicationSimulationTests/\(label)'")
        }
    }

    @Test("3 replicas, --ack quorum: one leader per epoch, no acknowledged write lost, logs agree, all converge")
    func quorumThreeReplicas() async {
        await runSeeds(SimulationOptions(), label: "quorumThreeReplicas", seeds: 200)
    }

    @Test("5 replicas, --ack quorum: the same invariants with two failures tolerated")
    func quorumFiveReplicas() async {
        var options = SimulationOptions()
        options.nodes = 5
        await runSeeds(options, label: "quorumFiveReplicas", seeds: 50)
    }

    @Test("3 replicas, --ack leader: one leader per epoch, logs agree, all converge (acknowledged writes may be lost)")
    func leaderAck() async {
        var options = SimulationOptions()
        options.ackMode = .leader
        await runSeeds(options, label: "leaderAck", seeds: 60)
    }

    @Test("3 and 5 replicas, one taken out during the faults: the same invariants, and its set settles")
    func removeReplica() async {
        await runMembershipChange(\.removeReplica, label: "removeReplica")
    }

    @Test("3 and 5 replicas, one added during the faults: it seeds from the leader, tails, the same invariants, its set settles")
    func addReplica() async {
        await runMembershipChange(\.addReplica, label: "addReplica")
    }

    /// 100 seeds of 3 replicas and 30 of 5 with one change of the replica set (`change` on).
    private func runMembershipChange(_ change: WritableKeyPath<SimulationOptions, Bool>, label: String) async {
        var options = SimulationOptions()
        options[keyPath: change] = true
        await runSeeds(options, label: label, seeds: 100)
        options.nodes = 5
        await runSeeds(options, label: label, seeds: 30)
    }

    @Test("the same seed gives the same run")
    func deterministic() {
        let a = Simulation(seed: 42)
        let b = Simulation(seed: 42)
        #expect(a.run() == nil && b.run() == nil)
        #expect(a.steps == b.steps && a.ackedOrder == b.ackedOrder)
        #expect(a.nodes.map(\.log) == b.nodes.map(\.log))
        #expect(a.trace == b.trace)
    }

    @Test("the runs exercise what they claim to: acknowledged writes, failovers, truncated divergent suffixes, compactions")
    func exercisesFailover() {
        let runs = (1...10 as ClosedRange<UInt64>).map { seed in
            let s = Simulation(seed: seed)
            #expect(s.run() == nil)
            return s
        }
        #expect(runs.allSatisfy { $0.ackedOrder.count > 50 })
        #expect(runs.filter { $0.leaderOfEpoch.count >= 2 }.count >= 5)
        #expect(runs.map(\.truncations).reduce(0, +) > 0)
        // Every node compacts behind the horizon as it goes (and no replica ever needs what was compacted).
        #expect(runs.allSatisfy { $0.compactions > 0 })
        // Leaders ship frames before their own fsync, and crash right after doing so; some lose frames (never
        // fsynced) that a follower holds — which the invariants above must survive.
        #expect(runs.allSatisfy { $0.shippedUnsynced > 0 })
        #expect(runs.map(\.crashesAfterShipping).reduce(0, +) >= 5)
        #expect(runs.map(\.leaderLostShippedFrames).reduce(0, +) > 0)
    }
}
