import Cloudlet
import CloudletClient
import CloudletServer
import CloudletTestSupport
import Foundation
import Testing

/// An in-process `cloudlet serve` on a free loopback port over a temp store, with an API token and two users; and
/// the same store's embedded databases, so a test can run one scenario against both.
final class ClientFixture: Sendable {
    static let container = "iCloud.com.example.client"

    let dir: TempDir
    let store: CloudletStore
    let server: Server
    let apiToken: String
    let alice: (user: Credentials.User, token: String)
    let bob: (user: Credentials.User, token: String)

    private init(dir: TempDir, configure: (inout ServerConfiguration) -> Void) async throws {
        self.dir = dir
        store = try await CloudletStore.open(at: dir.sub("store"), configuration: StoreConfiguration(durability: .os))
        let credentials = Credentials(store: store)
        apiToken = try await credentials.createAPIToken(container: Self.container)
        let a = try await credentials.createUser(name: "alice")
        let b = try await credentials.createUser(name: "bob")
        alice = (a.user, a.webAuthToken)
        bob = (b.user, b.webAuthToken)
        var config = ServerConfiguration()
        config.port = 0
        config.log = { _ in }
        configure(&config)
        server = try Server(store: store, configuration: config)
        try server.start()
    }

    static func start(configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> ClientFixture {
        try await ClientFixture(dir: TempDir("cloudlet-client"), configure: configure)
    }

    /// Stops the server on a thread of its own: `stop` blocks while the front end's workers finish the requests
    /// they run, which may need the cooperative pool (two fixtures stopping at once on the pool's two threads
    /// deadlocked with the earlier front end).
    func shutdown() async {
        let server = self.server
        await onOwnThread { server.stop() }
        try? await store.close()
    }

    /// A client signed in as alice (or as `token`'s user).
    func client(token: String? = nil, configuration: CloudletClient.Configuration = .init()) -> CloudletClient {
        CloudletClient(url: server.url, apiToken: apiToken, webAuthToken: token ?? alice.token, configuration: configuration)
    }

    /// alice's private database through the server.
    func remote(_ scope: DatabaseScope = .private) -> RemoteDatabase {
        client().container(Self.container).database(scope)
    }

    /// alice's private database, embedded.
    func embedded(_ scope: DatabaseScope = .private) throws -> Database {
        try store.container(Self.container).database(scope, user: alice.user.userRecordName)
    }
}

/// Runs blocking `work` on a new thread (neither the cooperative pool nor Dispatch's) and waits for it.
func onOwnThread(_ work: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
        Thread {
            work()
            c.resume()
        }.start()
    }
}

/// Runs `body` with a fresh fixture and shuts it down afterwards, whatever happens.
func withFixture<T>(
    configure: (inout ServerConfiguration) -> Void = { _ in }, _ body: (ClientFixture) async throws -> T
) async throws -> T {
    let f = try await ClientFixture.start(configure: configure)
    do {
        let r = try await body(f)
        await f.shutdown()
        return r
    } catch {
        await f.shutdown()
        throw error
    }
}
