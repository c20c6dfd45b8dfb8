import CloudletCluster
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

/// The etcd client against a real etcd on loopback.
@Suite(.enabled(if: EtcdProcess.isInstalled, "etcd-server is not installed (.ci/install-deps)"))
struct EtcdClientTests {
    @Test func putGetListAndDelete() async throws {
        let dir = TempDir("etcd")
        let etcd = try await EtcdProcess(directory: dir.sub("etcd"))
        defer { withExtendedLifetime(etcd) {} }
        let client = EtcdClient(url: etcd.url.replacingOccurrences(of: "http://", with: "etcd://"))
        let rev = try await client.put("/a/1", Array("one".utf8))
        try await client.put("/a/2", [0, 255, 7])
        try await client.put("/b", Array("other".utf8))
        let one = try #require(try await client.get("/a/1"))
        #expect(one.value == Array("one".utf8))
        #expect(one.createRevision == rev)
        #expect(try await client.list(prefix: "/a/").map(\.key) == ["/a/1", "/a/2"])
        #expect(try await client.list(prefix: "/a/").last?.value == [0, 255, 7])
        #expect(try await client.delete("/a/1") == 1)
        #expect(try await client.get("/a/1") == nil)
    }

    @Test func createIsACompareAndSwapWhoseRevisionIsTheKeysCreateRevision() async throws {
        let dir = TempDir("etcd")
        let etcd = try await EtcdProcess(directory: dir.sub("etcd"))
        defer { withExtendedLifetime(etcd) {} }
        let client = EtcdClient(url: etcd.url)
        // Long enough to outlive the test on a loaded machine (a parallel run once took 46 s): expiry is not tested here.
        let lease = try await client.grantLease(ttl: 300)
        let epoch = try #require(try await client.create("/leader", Array("n1".utf8), lease: lease))
        #expect(try await client.create("/leader", Array("n2".utf8), lease: lease) == nil)
        let key = try #require(try await client.get("/leader"))
        #expect(key.createRevision == epoch)
        #expect(key.value == Array("n1".utf8))
        #expect(key.lease == lease)
        // Resigning names the term: an older one deletes nothing.
        #expect(try await client.delete("/leader", ifCreatedAt: epoch - 1) == false)
        #expect(try await client.delete("/leader", ifCreatedAt: epoch) == true)
        let next = try #require(try await client.create("/leader", Array("n2".utf8), lease: lease))
        #expect(next > epoch)
    }

    @Test func revokingALeaseDeletesItsKeysAndEndsKeepAlives() async throws {
        let dir = TempDir("etcd")
        let etcd = try await EtcdProcess(directory: dir.sub("etcd"))
        defer { withExtendedLifetime(etcd) {} }
        let client = EtcdClient(url: etcd.url)
        let lease = try await client.grantLease(ttl: 300)  // outlives a loaded machine; revocation is what is tested
        try await client.put("/progress/n1", [1], lease: lease)
        #expect(try await client.keepAlive(lease))
        try await client.revokeLease(lease)
        #expect(try await client.get("/progress/n1") == nil)
        #expect(try await client.keepAlive(lease) == false)
    }

    @Test func anUnreachableEtcdIsServiceUnavailableNamingIt() async throws {
        let port = try freeLoopbackPort()
        let client = EtcdClient(url: "etcd://127.0.0.1:\(port)")
        let error = await #expect(throws: CloudletError.self) { try await client.get("/x") }
        #expect(error?.code == .serviceUnavailable)
        #expect(error?.message.contains("127.0.0.1:\(port)") == true)
    }
}
