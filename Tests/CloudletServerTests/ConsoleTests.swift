import CloudletWire
import Foundation
import Synchronization
import Testing

@testable import Cloudlet
@testable import CloudletServer

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The console's security over HTTP (docs/console.md): no console page or API call without an admin session, the
/// CSRF token on every state-changing request, no way in with a user's or an API token, sign-out. The browser test
/// (Tests/Browser/console_test.py) covers what the pages do.
@Suite("Console security", .liveServer)
struct ConsoleTests {
    /// A response with its headers.
    struct Answer: CustomStringConvertible {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
        var json: JSONValue { (try? JSONParser.parse(body)) ?? .null }
        var serverErrorCode: String? { json["serverErrorCode"]?.stringValue }
        var setCookie: String? { headers.first { $0.key.lowercased() == "set-cookie" }?.value }
        var description: String { "HTTP \(status): \(text.prefix(300))" }
    }

    /// No cookie jar: every cookie a test sends is one it chose.
    static let session: URLSession = {
        let config = URLSessionConfiguration.ephemeral
        config.httpShouldSetCookies = false
        config.httpCookieAcceptPolicy = .never
        config.httpCookieStorage = nil
        config.timeoutIntervalForRequest = 30
        return URLSession(configuration: config)
    }()

    static func send(
        _ method: String, _ path: String, body: String? = nil, cookie: String? = nil, csrf: String? = nil,
        headers: [String: String] = [:]
    ) async throws -> Answer {
        var request = URLRequest(url: URL(string: try live.server.url + path)!)
        request.httpMethod = method
        if let body { request.httpBody = Data(body.utf8) }
        if let cookie { request.setValue("\(ConsoleHandler.cookieName)=\(cookie)", forHTTPHeaderField: "Cookie") }
        if let csrf { request.setValue(csrf, forHTTPHeaderField: "X-Cloudlet-CSRF") }
        for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
        let (data, response) = try await session.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (k, v) in http.allHeaderFields { fields["\(k)"] = "\(v)" }
        return Answer(status: http.statusCode, headers: fields, body: Array(data))
    }

    /// Signs in with the admin credential: the session ID (the cookie's value) and the CSRF token.
    static func signIn() async throws -> (cookie: String, csrf: String) {
        let r = try await send("POST", "/cloudlet/console/api/signin", body: #"{"token":"\#(try live.adminToken)"}"#)
        try #require(r.status == 200, "\(r)")
        let header = try #require(r.setCookie, "no Set-Cookie: \(r.headers)")
        let value = try #require(header.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last)
        return (String(value), try #require(r.json["csrfToken"]?.stringValue))
    }

    static let api = "/cloudlet/console/api/"
    static var container: String { LiveServer.container }
    /// Every kind of console API call, read and write.
    static let apiCalls: [(method: String, path: String, body: String?)] = [
        ("GET", "session", nil),
        ("GET", "schema?container=\(LiveServer.container)", nil),
        ("GET", "metrics", nil),
        ("GET", "admin/schema/export?container=\(LiveServer.container)", nil),
        ("GET", "admin/tokens/list", nil),
        ("POST", "admin/schema/import?container=\(LiveServer.container)", "DEFINE SCHEMA RECORD TYPE Intruder (x STRING);"),
        ("POST", "admin/schema/deploy?container=\(LiveServer.container)", nil),
        ("POST", "admin/schema/reset?container=\(LiveServer.container)", nil),
        ("POST", "database/\(LiveServer.container)/development/public/records/query", #"{"query":{"recordType":"Note"}}"#),
        ("POST", "database/\(LiveServer.container)/development/public/records/modify", "{\"operations\":[\(createOp("intruder"))]}"),
        ("POST", "signout", nil),
    ]

    @Test("without a session: the root is the sign-in page, every other page and every API call is refused")
    func nothingWithoutASession() async throws {
        let root = try await Self.send("GET", "/cloudlet/console/")
        #expect(root.status == 200)
        #expect(root.text.contains("signin-form") && !root.text.contains("console.js"), "\(root)")
        #expect(try await Self.send("GET", "/cloudlet/console/console.js").status == 401)
        #expect(try await Self.send("GET", "/cloudlet/console/index.html").status == 404)
        for call in Self.apiCalls {
            let r = try await Self.send(call.method, Self.api + call.path, body: call.body)
            #expect(r.status == 401 && r.serverErrorCode == "AUTHENTICATION_REQUIRED", "\(call.method) \(call.path): \(r)")
        }
        // Nothing of the refused writes happened.
        let schema = try await live.store.container(Self.container).exportSchema()
        #expect(!schema.contains("Intruder"))
    }

    @Test(
        "signing in takes only an admin credential",
        arguments: ["alice's web auth token", "an API token", "an unknown token", "nothing"])
    func signInRefusesOtherTokens(_ what: String) async throws {
        let s = try live
        let token = switch what {
        case "alice's web auth token": s.alice.token
        case "an API token": s.apiToken
        case "an unknown token": String(repeating: "ab", count: 32)
        default: ""
        }
        let r = try await Self.send("POST", "/cloudlet/console/api/signin", body: #"{"token":"\#(token)"}"#)
        #expect(r.status == 401 || r.status == 400, "\(r)")
        #expect(r.setCookie == nil, "\(what) got a session: \(r.headers)")
    }

    @Test("a user's web auth token or an admin token in place of the session opens nothing")
    func userTokensDoNotOpenTheConsole() async throws {
        let s = try live
        let asUser = "?ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(s.alice.token)"
        for (cookie, headers) in [
            (s.alice.token, [:]), (nil, ["Authorization": "Bearer \(s.alice.token)"]),
            (s.adminToken, [:]), (nil, ["Authorization": "Bearer \(s.adminToken)"]),
        ] as [(String?, [String: String])] {
            let page = try await Self.send("GET", "/cloudlet/console/console.js" + asUser, cookie: cookie, headers: headers)
            #expect(page.status == 401, "\(page)")
            let call = try await Self.send(
                "POST", Self.api + "admin/schema/import\(asUser)&container=\(Self.container)",
                body: "DEFINE SCHEMA RECORD TYPE Intruder (x STRING);", cookie: cookie, headers: headers)
            #expect(call.status == 401, "\(call)")
        }
        #expect(!(try live.store.container(Self.container).exportSchema().contains("Intruder")))
    }

    @Test("the session cookie is HttpOnly, SameSite=Strict, scoped to the console, Secure only over TLS")
    func cookieFlags() async throws {
        let r = try await Self.send("POST", "/cloudlet/console/api/signin", body: #"{"token":"\#(try live.adminToken)"}"#)
        let cookie = try #require(r.setCookie)
        for flag in ["HttpOnly", "SameSite=Strict", "Path=/cloudlet/console"] { #expect(cookie.contains(flag), "\(cookie)") }
        #expect(!cookie.contains("Secure"))
        // Over TLS (the listener sets isTLS): the same request answered by the handler directly.
        let router = try APIRouter(store: try live.store, configuration: ServerConfiguration())
        var tls = HTTPRequest(method: "POST", path: "/cloudlet/console/api/signin", isTLS: true)
        tls.body = Array(#"{"token":"\#(try live.adminToken)"}"#.utf8)
        let (_, answer) = ConsoleHandler(router: router).respond(tls)
        let secure = try #require(answer.headers.first { $0.0 == "Set-Cookie" }?.1)
        #expect(secure.contains("; Secure"), "\(secure)")
    }

    @Test("every state-changing call needs the session's own CSRF token; reads do not")
    func csrfRequired() async throws {
        let mine = try await Self.signIn()
        let other = try await Self.signIn()
        let path = Self.api + "admin/schema/import?container=\(Self.container)"
        let text = "DEFINE SCHEMA RECORD TYPE CsrfProbe (x STRING);"
        for csrf in [nil, "", String(repeating: "0", count: 64), other.csrf] {
            let r = try await Self.send("POST", path, body: text, cookie: mine.cookie, csrf: csrf)
            #expect(r.status == 403 && r.serverErrorCode == "ACCESS_DENIED", "CSRF \(csrf ?? "none"): \(r)")
        }
        #expect(!(try live.store.container(Self.container).exportSchema().contains("CsrfProbe")))
        for call in Self.apiCalls where call.method == "POST" {
            let r = try await Self.send("POST", Self.api + call.path, body: call.body, cookie: mine.cookie)
            #expect(r.status == 403, "\(call.path) without CSRF: \(r)")
        }
        #expect(try await Self.send("GET", Self.api + "session", cookie: mine.cookie).status == 200)
        let ok = try await Self.send("POST", path, body: text, cookie: mine.cookie, csrf: mine.csrf)
        #expect(ok.status == 200, "\(ok)")
        #expect(try live.store.container(Self.container).exportSchema().contains("CsrfProbe"))
    }

    @Test("every file of Console/Web is served from the binary, as it is in the repository, with its content type")
    func filesAreEmbedded() async throws {
        let s = try await Self.signIn()
        let web = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/CloudletServer/Console/Web")
        let names = try FileManager.default.contentsOfDirectory(atPath: web.path).filter { !$0.hasPrefix(".") }
        #expect(names.contains("console.js") && names.contains("index.html"), "\(names)")
        for name in names {
            let disk = try Data(contentsOf: web.appendingPathComponent(name))
            // The two pages are served at the root only (the console signed in, sign-in otherwise).
            let path = name == "index.html" || name == "signin.html" ? "" : name
            let r = try await Self.send("GET", "/cloudlet/console/" + path, cookie: name == "signin.html" ? nil : s.cookie)
            #expect(r.status == 200 && r.body == Array(disk), "\(name): \(r.status), \(r.body.count) bytes, \(disk.count) on disk")
            #expect(r.headers["Content-Type"] == ConsoleHandler.contentType(name), "\(name)")
        }
    }

    @Test("signing out ends the session and clears the cookie")
    func signOut() async throws {
        let s = try await Self.signIn()
        #expect(try await Self.send("GET", Self.api + "session", cookie: s.cookie).status == 200)
        #expect(try await Self.send("GET", "/cloudlet/console/console.js", cookie: s.cookie).status == 200)
        let out = try await Self.send("POST", Self.api + "signout", cookie: s.cookie, csrf: s.csrf)
        #expect(out.status == 200)
        #expect(out.setCookie?.contains("Max-Age=0") == true, "\(out.headers)")
        #expect(try await Self.send("GET", Self.api + "session", cookie: s.cookie).status == 401)
        #expect(try await Self.send("GET", "/cloudlet/console/console.js", cookie: s.cookie).status == 401)
    }

    @Test("database calls act for the admin: the developer on the public database, the named user on a private one")
    func databaseCallsActForTheAdmin() async throws {
        let s = try await Self.signIn()
        let name = unique("console")
        let base = Self.api + "database/\(Self.container)/development/"
        let pub = try await Self.send(
            "POST", base + "public/records/modify", body: "{\"operations\":[\(createOp(name))]}", cookie: s.cookie, csrf: s.csrf)
        #expect(pub.status == 200 && pub.text.contains("__defaultOwner__"), "\(pub)")
        // alice reads it through the CloudKit API.
        let lookup = try await HTTP.post(try live.url("records/lookup", db: "public"), #"{"records":[{"recordName":"\#(name)"}]}"#)
        #expect(lookup.records.first?["recordName"]?.stringValue == name, "\(lookup)")
        // A private database needs a user …
        let noUser = try await Self.send(
            "POST", base + "private/records/modify", body: "{\"operations\":[\(createOp(name))]}", cookie: s.cookie, csrf: s.csrf)
        #expect(noUser.status == 400, "\(noUser)")
        // … and is that user's.
        let asAlice = try await Self.send(
            "POST", base + "private/records/modify?user=alice", body: "{\"operations\":[\(createOp(name))]}", cookie: s.cookie,
            csrf: s.csrf)
        #expect(asAlice.status == 200, "\(asAlice)")
        let mine = try await HTTP.post(try live.url("records/lookup"), #"{"records":[{"recordName":"\#(name)"}]}"#)
        #expect(mine.records.first?["serverErrorCode"] == nil && mine.records.first?["recordName"]?.stringValue == name, "\(mine)")
        let bobs = try await HTTP.post(try live.url("records/lookup", as: "bob"), #"{"records":[{"recordName":"\#(name)"}]}"#)
        #expect(bobs.records.first?["serverErrorCode"]?.stringValue == "NOT_FOUND", "\(bobs)")
        // Operations that belong to a user's client are not the console's.
        let token = try await Self.send("POST", base + "public/tokens/create", body: "{}", cookie: s.cookie, csrf: s.csrf)
        #expect(token.status == 404, "\(token)")
    }

    @Test("the Health page's metrics carry the cluster's (replication lag), as /cloudlet/metrics does")
    func metricsCarryTheClusters() async throws {
        var config = ServerConfiguration()
        let lag = #"cloudlet_cluster_replica_lag_lsns{log="0",node="b"} 7"#
        config.additionalMetrics = { lag + "\n" }
        let router = try APIRouter(store: try live.store, configuration: config)
        let (id, _) = try router.authenticator.consoleSessions.create()
        var console = HTTPRequest(method: "GET", path: "/cloudlet/console/api/metrics")
        console.cookie = "\(ConsoleHandler.cookieName)=\(id)"
        var scrape = HTTPRequest(method: "GET", path: "/cloudlet/metrics")
        scrape.authorization = "Bearer " + (try live.adminToken)
        for (what, answer) in [("console", ConsoleHandler(router: router).respond(console).1), ("scrape", router.handle(scrape))] {
            let text = String(decoding: answer.body, as: UTF8.self)
            #expect(answer.status == 200 && text.contains("cloudlet_store_commits_total"), "\(what): \(text.prefix(200))")
            #expect(text.contains(lag), "\(what) lacks the additional metrics")
        }
    }

    @Test("the record editor's files: an upload URL signed for the admin, and the receipt saves the asset")
    func assetUploadForTheAdmin() async throws {
        let s = try await Self.signIn()
        let base = Self.api + "database/\(Self.container)/development/public/"
        let name = unique("poster")
        let urls = try await Self.send(
            "POST", base + "assets/upload", body: #"{"tokens":[{"recordType":"Poster","fieldName":"image","recordName":"\#(name)"}]}"#,
            cookie: s.cookie, csrf: s.csrf)
        let url = try #require(urls.json["tokens"]?.arrayValue?.first?["url"]?.stringValue, "\(urls)")
        // Without the CSRF token: no upload URL.
        let refused = try await Self.send(
            "POST", base + "assets/upload", body: #"{"tokens":[{"recordType":"Poster","fieldName":"image"}]}"#, cookie: s.cookie)
        #expect(refused.status == 403, "\(refused)")
        let bytes = Array("console poster".utf8)
        let up = try await HTTP.send("POST", url, body: bytes)
        let single = try #require(up.json["singleFile"], "\(up)")
        var w = JSONWriter()
        w.value(single)
        let saved = try await Self.send(
            "POST", base + "records/modify",
            body: "{\"operations\":[\(createOp(name, type: "Poster", fields: "\"image\":{\"value\":\(String(decoding: w.bytes, as: UTF8.self))}"))]}",
            cookie: s.cookie, csrf: s.csrf)
        let record = try #require(saved.json["records"]?.arrayValue?.first, "\(saved)")
        #expect(record["serverErrorCode"] == nil, "\(saved)")
        let asset = record["fields"]?["image"]?["value"]
        #expect(asset?["size"]?.int64Value == Int64(bytes.count) && asset?["fileChecksum"] == single["fileChecksum"], "\(record)")
    }

    @Test("the change-feed websocket opens only for a console session from the console's own origin")
    func changeFeedNeedsTheSession() async throws {
        let router = try APIRouter(store: try live.store, configuration: ServerConfiguration())
        let feed = ConsoleChangeFeed(router: router)
        let (id, _) = try router.authenticator.consoleSessions.create()
        var request = HTTPRequest(method: "GET", path: ConsoleChangeFeed.path, host: "127.0.0.1:8080")
        #expect(!feed.admits(request))
        request.cookie = "\(ConsoleHandler.cookieName)=\(try live.alice.token)"
        #expect(!feed.admits(request))
        request.cookie = "other=1; \(ConsoleHandler.cookieName)=\(id)"
        #expect(feed.admits(request))
        for (origin, admitted) in [
            ("http://127.0.0.1:8080", true), ("http://evil.example:8080", false), ("http://127.0.0.1:9999", false),
        ] {
            request.origin = origin
            #expect(feed.admits(request) == admitted, "\(origin)")
        }
    }
}

/// On a server of its own: revoking ends every console session, and held index builds, would disturb the suite above.
@Suite("Console on a server of its own", .liveServer, .serialized)
struct ConsoleRevocationTests {
    @Test("the schema says which fields' indexes are still building, and how far each build is")
    func schemaShowsIndexBuilds() async throws {
        let s = try await ConsoleTests.signIn()
        let store = try live.store
        let db = try store.container(ConsoleTests.container).database(.public, access: AccessContext(.serverKey("test")))
        let count = IndexBuilder.chunkSize * 2 + 88
        for start in stride(from: 0, to: count, by: 200) {
            _ = try await db.modify(
                (start..<min(start + 200, count)).map { .create(Record(recordType: "Shelf", recordName: "s\($0)", fields: ["rank": .int64(Int64($0))])) })
        }
        store.indexBuilder.pause()
        let imported = try await ConsoleTests.send(
            "POST", "/cloudlet/console/api/admin/schema/import?container=\(ConsoleTests.container)",
            body: "DEFINE SCHEMA RECORD TYPE Shelf (rank INT64 SORTABLE);", cookie: s.cookie, csrf: s.csrf)
        #expect(imported.status == 200, "\(imported)")
        func rank() async throws -> JSONValue? {
            let r = try await ConsoleTests.send("GET", "/cloudlet/console/api/schema?container=\(ConsoleTests.container)", cookie: s.cookie)
            let shelf = r.json["recordTypes"]?.arrayValue?.first { $0["name"]?.stringValue == "Shelf" }
            return shelf?["fields"]?.arrayValue?.first { $0["name"]?.stringValue == "rank" }
        }
        // Queued: building, no progress yet.
        let queued = try await rank()
        #expect(queued?["building"]?.boolValue == true && queued?["buildProgress"] == nil, "\(String(describing: queued))")
        // Halfway: the builder is held after its first chunk.
        let reached = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let first = Atomic<Bool>(true)
        store.indexBuilder.chunkMerged.withLock {
            $0 = { _ in
                guard first.exchange(false, ordering: .relaxed) else { return }
                reached.signal()
                release.wait()
            }
        }
        defer { store.indexBuilder.chunkMerged.withLock { $0 = nil } }
        store.indexBuilder.resume()
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in DispatchQueue.global().async { reached.wait(); c.resume() } }
        let halfway = try await rank()
        release.signal()
        #expect(halfway?["building"]?.boolValue == true)
        #expect(halfway?["buildProgress"]?["recordsDone"]?.int64Value == Int64(IndexBuilder.chunkSize), "\(String(describing: halfway))")
        #expect(halfway?["buildProgress"]?["recordsTotal"]?.int64Value == Int64(count))
        await store.waitForIndexBuilds()
        let after = try await rank()
        let pending = try store.container(ConsoleTests.container).indexesBuilding()
        #expect(after?["building"]?.boolValue == false && after?["buildProgress"] == nil, "still building: \(pending)")
    }

    @Test("revoking a token while the server runs ends every console session")
    func revokingEndsSessions() async throws {
        let s = try await ConsoleTests.signIn()
        #expect(try await ConsoleTests.send("GET", "/cloudlet/console/api/session", cookie: s.cookie).status == 200)
        let spare = try await Credentials(store: try live.store).createAdminToken()
        let id = String(Secrets.fingerprint(spare).prefix(16))
        let revoked = try await HTTP.send(
            "POST", try live.server.url + "/cloudlet/admin/tokens/revoke?id=\(id)", headers: HTTP.bearer(try live.adminToken))
        #expect(revoked.status == 200, "\(revoked)")
        #expect(try await ConsoleTests.send("GET", "/cloudlet/console/api/session", cookie: s.cookie).status == 401)
    }
}

/// The console's change view is pushed when a change commits (``CommitSignal``), not polled.
@Suite("Console change feed", .liveServer)
struct ConsoleChangeFeedTests {
    @Test("a commit to the watched zone wakes the feed; each commit wakes it again")
    func commitsWakeTheFeed() async throws {
        let store = try live.store
        let zone = unique("Watched")
        let signal = CommitSignal(store: store, container: LiveServer.container, environment: .development, zone: zone)
        defer { signal.cancel() }
        let db = try store.container(LiveServer.container).privateDatabase(user: "console-feed")
        let zoneID = ZoneID(zoneName: zone, ownerName: "console-feed")
        _ = try await db.createZone(zoneID)
        #expect(await Self.woken(signal), "creating the zone did not wake the feed")
        _ = try await db.modify([.create(Record(recordType: "Note", recordName: "n1", zoneID: zoneID))])
        #expect(await Self.woken(signal), "a record saved in the zone did not wake the feed")
    }

    @Test("which commits concern a feed: its zone's in the container's environment; any of them for the database feed")
    func whichCommitsMatter() {
        let db = DatabaseID(container: "iCloud.a", environment: .development, scope: .private, owner: "_u")
        let other = DatabaseID(container: "iCloud.b", environment: .development, scope: .private, owner: "_u")
        let inbox = ZoneID(zoneName: "Inbox", ownerName: "_u")
        let saved = ChangeEvent.recordSaved(db, Record(recordType: "T", recordName: "r", zoneID: inbox))
        let deleted = ChangeEvent.recordDeleted(db, RecordID(recordName: "r", zoneID: inbox), recordType: "T")
        for event in [saved, deleted, .zoneCreated(db, inbox), .zoneDeleted(db, inbox)] {
            #expect(CommitSignal.matches(event, container: "iCloud.a", environment: .development, zone: "Inbox"))
            #expect(CommitSignal.matches(event, container: "iCloud.a", environment: .development, zone: nil))
            #expect(!CommitSignal.matches(event, container: "iCloud.a", environment: .development, zone: "Outbox"))
            #expect(!CommitSignal.matches(event, container: "iCloud.a", environment: .production, zone: nil))
            #expect(!CommitSignal.matches(event, container: "iCloud.b", environment: .development, zone: "Inbox"))
        }
        #expect(!CommitSignal.matches(.recordSaved(other, Record(recordType: "T", recordName: "r", zoneID: inbox)),
            container: "iCloud.a", environment: .development, zone: "Inbox"))
    }

    /// Whether the signal fires before the wait is cancelled `seconds` later (the limit only bounds a failing test).
    static func woken(_ signal: CommitSignal, cancelledAfter seconds: Double = 30) async -> Bool {
        let wait = Task { await signal.wait() }
        let limit = Task {
            try? await Task.sleep(for: .seconds(seconds))
            wait.cancel()
        }
        defer { limit.cancel() }
        return await wait.value
    }

    @Test("a wait with no commit ends when cancelled, and a commit while nobody waits is kept for the next wait")
    func waitsEndWhenCancelledAndKeepWhatCameMeanwhile() async throws {
        let store = try live.store
        let zone = unique("Quiet")
        let signal = CommitSignal(store: store, container: LiveServer.container, environment: .development, zone: zone)
        defer { signal.cancel() }
        #expect(await Self.woken(signal, cancelledAfter: 0.05) == false)
        let db = try store.container(LiveServer.container).privateDatabase(user: "console-feed")
        _ = try await db.createZone(ZoneID(zoneName: zone, ownerName: "console-feed"))
        // Nobody waited while the zone was created: the next wait returns at once (the limit only bounds a failure).
        #expect(await Self.woken(signal))
    }
}
