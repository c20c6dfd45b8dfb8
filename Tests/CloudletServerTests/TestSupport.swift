import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An HTTP response as the tests look at it.
struct Reply: Sendable, CustomStringConvertible {
    var status: Int
    var body: [UInt8]

    /// The body parsed as JSON (a test failure, and `.null`, if it is not).
    var json: JSONValue {
        do { return try JSONParser.parse(body) } catch {
            Issue.record("response is not JSON (\(error)): \(text)")
            return .null
        }
    }
    var text: String { String(decoding: body, as: UTF8.self) }
    var serverErrorCode: String? { json["serverErrorCode"]?.stringValue }
    var reason: String { json["reason"]?.stringValue ?? "" }
    /// `records` (or `zones`) of a response.
    var records: [JSONValue] { json["records"]?.arrayValue ?? [] }
    var zones: [JSONValue] { json["zones"]?.arrayValue ?? [] }
    var description: String { "HTTP \(status): \(text.prefix(600))" }
}

/// A small HTTP client over URLSession (FoundationNetworking on Linux).
struct HTTP {
    static let session: URLSession = {
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = 30
        config.httpMaximumConnectionsPerHost = 16
        return URLSession(configuration: config)
    }()

    static func send(_ method: String, _ url: String, body: [UInt8]? = nil, headers: [String: String] = [:])
        async throws -> Reply
    {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
        if let body {
            request.httpBody = Data(body)
            request.setValue("text/plain", forHTTPHeaderField: "Content-Type")  // what Apple's examples send
        }
        let (data, response) = try await session.data(for: request)
        return Reply(status: (response as! HTTPURLResponse).statusCode, body: Array(data))
    }

    static func post(_ url: String, _ json: String) async throws -> Reply { try await send("POST", url, body: Array(json.utf8)) }
    /// The `Authorization` header of an admin credential.
    static func bearer(_ token: String) -> [String: String] { ["Authorization": "Bearer \(token)"] }
    static func get(_ url: String) async throws -> Reply { try await send("GET", url) }
}

/// A running in-process server on port 0 over a temp store, with an API token for ``container``, one for
/// ``otherContainer``, and users alice and bob.
final class LiveServer: Sendable {
    static let container = "iCloud.com.example.tests"
    static let otherContainer = "iCloud.com.example.other"

    let dir: TempDir
    let store: CloudletStore
    let server: Server
    let apiToken: String
    let otherAPIToken: String
    let alice: (user: Credentials.User, token: String)
    let bob: (user: Credentials.User, token: String)
    /// An admin credential (`Authorization: Bearer …` on `/cloudlet/admin/*` and metrics).
    let adminToken: String

    /// Access-log lines, for the tests that check them.
    let logLines: LogLines

    /// The server of the suite this test runs in (see ``LiveServerTrait``).
    @TaskLocal static var current: LiveServer?

    private init(dir: TempDir, configure: (inout ServerConfiguration) -> Void) async throws {
        self.dir = dir
        store = try await CloudletStore.open(at: dir.sub("store"), configuration: StoreConfiguration(durability: .os))
        let credentials = Credentials(store: store)
        apiToken = try await credentials.createAPIToken(container: Self.container)
        otherAPIToken = try await credentials.createAPIToken(container: Self.otherContainer)
        let a = try await credentials.createUser(name: "alice")
        let b = try await credentials.createUser(name: "bob")
        alice = (a.user, a.webAuthToken)
        bob = (b.user, b.webAuthToken)
        adminToken = try await credentials.createAdminToken()
        let lines = LogLines()
        logLines = lines
        var config = ServerConfiguration()
        config.port = 0
        config.maxBodySize = 4 << 20
        config.log = { lines.append($0) }
        configure(&config)
        server = try Server(store: store, configuration: config)
        try server.start()
    }

    static func start(configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> LiveServer {
        try await LiveServer(dir: TempDir("cloudlet-server"), configure: configure)
    }

    func shutdown() async {
        server.stop()
        try? await store.close()
    }

    /// `{base}/database/1/{container}/{env}/{db}/{op}?ckAPIToken=…[&ckWebAuthToken=…]`.
    func url(
        _ op: String, db: String = "private", as user: String? = "alice", environment: String = "development",
        container: String = LiveServer.container, apiToken: String? = nil
    ) -> String {
        var s = "\(server.url)/database/1/\(container)/\(environment)/\(db)/\(op)?ckAPIToken=\(apiToken ?? self.apiToken)"
        switch user {
        case "alice": s += "&ckWebAuthToken=\(alice.token)"
        case "bob": s += "&ckWebAuthToken=\(bob.token)"
        case nil: break
        case let raw?: s += "&ckWebAuthToken=\(raw)"
        }
        return s
    }
}

/// Collected log lines. `@unchecked Sendable`: `lines` is guarded by `lock`.
final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

/// Starts one ``LiveServer`` around a whole suite (one server per suite: starting is cheap, but every test gets the
/// same users and tokens) and stops it at the end.
struct LiveServerTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let live = try await LiveServer.start()
        do {
            try await LiveServer.$current.withValue(live) { try await function() }
        } catch {
            await live.shutdown()
            throw error
        }
        await live.shutdown()
    }
}

extension Trait where Self == LiveServerTrait {
    /// Runs the suite against one live server: ``LiveServer/current``.
    static var liveServer: Self { LiveServerTrait() }
}

/// The suite's server.
var live: LiveServer {
    get throws { try #require(LiveServer.current, "no live server: add the .liveServer trait to the suite") }
}

/// A record name unique to this test run.
func unique(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())" }

/// One `create` operation's JSON for a Note with a title (and optional extra fields JSON).
func createOp(_ name: String, type: String = "Note", fields: String = #""title":{"value":"t"}"#) -> String {
    #"{"operationType":"create","record":{"recordName":"\#(name)","recordType":"\#(type)","fields":{\#(fields)}}}"#
}

/// Uploads `content` for `field` of a `type` record as a client does (`assets/upload`, then a POST to the URL it
/// gives) and returns the `singleFile` dictionary, also as JSON text to put in a `records/modify` body.
func uploadAsset(
    _ s: LiveServer, _ content: [UInt8], as user: String = "alice", db: String = "private", zone: String = "_defaultZone",
    type: String = "Photo", field: String
) async throws -> (json: String, singleFile: JSONValue) {
    let r = try await HTTP.post(
        s.url("assets/upload", db: db, as: user),
        #"{"zoneID":{"zoneName":"\#(zone)"},"tokens":[{"recordType":"\#(type)","fieldName":"\#(field)"}]}"#)
    let url = try #require(r.json["tokens"]?.arrayValue?.first?["url"]?.stringValue, "\(r)")
    let up = try await HTTP.send("POST", url, body: content)
    let single = try #require(up.json["singleFile"], "\(up)")
    var w = JSONWriter()
    w.value(single)
    return (String(decoding: w.bytes, as: UTF8.self), single)
}
