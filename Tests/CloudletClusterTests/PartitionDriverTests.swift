import Cloudlet
import CloudletCore
import CloudletReplication
import CloudletTestSupport
import Testing

@testable import CloudletCluster

/// The driver's commit gate, driven by hand on a one-replica partition (no etcd: its calls fail quietly).
struct PartitionDriverTests {
    @Test func aWriteStagedBeforeTheNodeStopsIsNeverReportedCommitted() async throws {
        let dir = TempDir("driver-stop")
        let store = try await CloudletStore.open(at: dir.path, configuration: StoreConfiguration(durability: .os))
        let config = ClusterConfiguration(etcd: "etcd://127.0.0.1:1", node: NodeID("n1"), advertise: "http://127.0.0.1:1")
        let node = ClusterNode(configuration: config, store: store)
        let driver = PartitionDriver(target: .partition(store.partitions[0]), node: node, replicas: [NodeID("n1")])
        let log = store.partitions[0].log
        driver.feed(.start(now: node.now(), lastLSN: log.lastLSN, history: EpochHistory()))
        driver.feed(.leaseGranted(lease: 7, sentAt: node.now()))
        driver.feed(.campaignResult(epoch: 5))
        #expect(driver.isLeader)
        let lsn = log.lastLSN + 1
        #expect(try driver.admit(lsn: lsn, fence: 0) == 5)
        // The node stops before the write's writer comes to wait for its acknowledgement.
        driver.stop()
        await #expect(throws: CloudletError.self) { try await driver.waitCommitted(lsn) }
        try await store.close()
    }
}
