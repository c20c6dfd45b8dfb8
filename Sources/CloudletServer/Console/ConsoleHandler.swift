import CloudletConcurrency
import CloudletWire
import Cloudlet

/// Cloudlet Console, the web dashboard under `/cloudlet/console/` (docs/console.md).
///
/// | Path | Method | Session | Answer |
/// |---|---|---|---|
/// | `/cloudlet/console/` | GET | — | the console with a session, the sign-in page without |
/// | `console.css`, `signin.js` | GET | — | the sign-in page's files (nothing secret) |
/// | any other file (`console.js`, …) | GET | required | the console's files |
/// | `api/signin` | POST `{"token"}` | — | an admin credential → a session cookie and `{csrfToken, expires}` |
/// | `api/session` | GET | required | `{csrfToken, expires}` |
/// | `api/signout` | POST | + CSRF | ends the session, clears the cookie |
/// | `api/schema?container=&environment=` | GET | required | record types, fields and index flags as JSON |
/// | `api/metrics` | GET | required | the Prometheus text of `/cloudlet/metrics` |
/// | `api/admin/{route}` | GET or POST | required (+ CSRF on POST) | the admin route `/cloudlet/admin/{route}` |
/// | `api/database/{container}/{environment}/{database}/{operation}[?user=NAME]` | POST | + CSRF | the CloudKit operation |
///
/// The session cookie is `HttpOnly; SameSite=Strict; Path=/cloudlet/console` (and `Secure` over TLS); every POST
/// but sign-in must carry the session's CSRF token in `X-Cloudlet-CSRF`. Only an admin credential opens a session:
/// a user's web auth token or an API token is refused. Database operations act for the admin: on the public
/// database as the developer (like a server-to-server key), on a private or shared database as the user `user`
/// names (`user` on the public database acts as that user, for their subscriptions).
struct ConsoleHandler {
    static let prefix = "/cloudlet/console"
    static let cookieName = "cloudlet_console"
    /// Files the sign-in page needs; every other file needs a session.
    static let publicFiles: Set<String> = ["console.css", "signin.js"]
    /// The database operations the console may perform (not notification tokens or user discovery: those are a
    /// user's client's). `assets/upload` gives upload URLs for the record editor's files, signed for the admin.
    static let databaseOperations: Set<Route> = [
        .recordsModify, .recordsLookup, .recordsQuery, .recordsCount, .zonesList, .zonesLookup, .zonesModify,
        .changesZone, .changesDatabase, .recordsChanges, .zonesChanges, .subscriptionsList, .subscriptionsLookup,
        .subscriptionsModify, .assetsUpload,
    ]

    let router: APIRouter
    var sessions: ConsoleSessions { router.authenticator.consoleSessions }

    /// The response to any request under ``prefix``, and its metrics label.
    func respond(_ request: HTTPRequest) -> (Route, HTTPResponse) {
        let rest = request.path.dropFirst(Self.prefix.count)
        if rest.isEmpty {
            return (.console, HTTPResponse(status: 302, headers: [("Location", Self.prefix + "/")], body: []))
        }
        guard rest.hasPrefix("/") else { return (.unmatched, APIError("NOT_FOUND", "no endpoint at '\(request.path)'").response) }
        let sub = String(rest.dropFirst())
        if sub.hasPrefix("api/") {
            var response: HTTPResponse
            do { response = try api(String(sub.dropFirst(4)), request) } catch { response = APIError(answering: error).response }
            response.headers.append(("Cache-Control", "no-store"))
            return (.consoleAPI, response)
        }
        return (.console, file(sub, request))
    }

    // MARK: - Pages and files

    private func file(_ name: String, _ request: HTTPRequest) -> HTTPResponse {
        guard request.method == "GET" else {
            return APIError.badRequest("console pages take GET, not \(request.method)").response
        }
        let signedIn = sessions.session(request.cookieValue(Self.cookieName)) != nil
        // The two pages are served at the console's root only: the console when signed in, else the sign-in page.
        let path = name.isEmpty ? (signedIn ? "index.html" : "signin.html") : name
        guard name.isEmpty || !name.hasSuffix(".html"), let bytes = ConsoleFiles.contents[path] else {
            return withPageHeaders(.text("no console file '\(name)'\n", status: 404))
        }
        if !signedIn && !name.isEmpty && !Self.publicFiles.contains(name) {
            return withPageHeaders(.text("sign in to the console first: \(Self.prefix)/\n", status: 401))
        }
        return withPageHeaders(HTTPResponse(status: 200, contentType: Self.contentType(path), body: bytes))
    }

    /// Headers every console file carries: no caching of the signed-in shell, no framing, scripts from here only.
    private func withPageHeaders(_ response: HTTPResponse) -> HTTPResponse {
        var r = response
        r.headers += [
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("X-Frame-Options", "DENY"),
            ("Referrer-Policy", "same-origin"),
            (
                "Content-Security-Policy",
                "default-src 'self'; img-src 'self' data: blob:; connect-src 'self'; style-src 'self'; "
                    + "script-src 'self'; frame-ancestors 'none'; form-action 'self'"
            ),
        ]
        return r
    }

    static func contentType(_ path: String) -> String {
        if path.hasSuffix(".html") { return "text/html; charset=utf-8" }
        if path.hasSuffix(".css") { return "text/css; charset=utf-8" }
        if path.hasSuffix(".js") { return "text/javascript; charset=utf-8" }
        if path.hasSuffix(".svg") { return "image/svg+xml" }
        return "application/octet-stream"
    }

    // MARK: - The console's JSON API

    private func api(_ path: String, _ request: HTTPRequest) throws -> HTTPResponse {
        if let length = request.oversizedBodyLength {
            throw APIError("BAD_REQUEST", "the request body is \(length) bytes, over the server's limit", status: 413)
        }
        if path == "signin" { return try signIn(request) }
        let cookie = request.cookieValue(Self.cookieName)
        guard let id = cookie, let session = sessions.session(id) else {
            throw APIError("AUTHENTICATION_REQUIRED", "sign in to the console with an admin credential first", status: 401)
        }
        if request.method != "GET" {
            guard let sent = request.csrfToken, Secrets.constantTimeEqual(sent.utf8, session.csrfToken.utf8) else {
                throw APIError("ACCESS_DENIED", "the console's CSRF token (X-Cloudlet-CSRF) is missing or wrong", status: 403)
            }
        }
        switch path {
        case "session":
            return json { w in
                w.member("csrfToken", session.csrfToken)
                w.member("expires", Int64(session.expires.timeIntervalSince1970 * 1000))
            }
        case "signout":
            try requireMethod("POST", request, path)
            sessions.remove(id)
            return HTTPResponse(
                status: 200, headers: [("Set-Cookie", cookieHeader("", request, maxAge: 0))], body: Array(#"{"status":"ok"}"#.utf8))
        case "schema":
            return try schema(request)
        case "metrics":
            return router.metricsResponse()
        default:
            if path.hasPrefix("admin/"), let route = Route(rawValue: "cloudlet/" + path), route.rawValue.hasPrefix("cloudlet/admin/") {
                return AdminHandler(store: router.store, authenticator: router.authenticator).respond(request, route: route, signedIn: true)
            }
            if path.hasPrefix("database/") { return try database(String(path.dropFirst("database/".count)), request) }
            throw APIError("NOT_FOUND", "no console endpoint at 'api/\(path)'")
        }
    }

    /// `POST api/signin` with `{"token": ADMIN_TOKEN}`: a new session. A user's web auth token, an API token or
    /// anything else that is not an admin credential is refused (`AUTHENTICATION_FAILED`).
    private func signIn(_ request: HTTPRequest) throws -> HTTPResponse {
        try requireMethod("POST", request, "signin")
        let body: [String: JSONValue]
        do { body = try JSONParser.parse(request.body).requireObject(at: "") } catch {
            throw APIError.badRequest("sign-in takes a JSON object {\"token\": \"…\"}")
        }
        guard let token = body["token"]?.stringValue?.trimmingSpaces, !token.isEmpty else {
            throw APIError.badRequest("sign-in needs the admin credential in \"token\"")
        }
        var probe = request
        probe.authorization = "Bearer " + token
        do { try router.authenticator.authenticateAdmin(probe, for: "the console") } catch let e as APIError
        where e.serverErrorCode == "AUTHENTICATION_FAILED" {
            throw APIError(
                "AUTHENTICATION_FAILED",
                "that is not an admin credential (make one with `cloudlet token add --admin`; user and API tokens do not open the console)")
        }
        let (id, session) = try sessions.create()
        var response = json { w in
            w.member("csrfToken", session.csrfToken)
            w.member("expires", Int64(session.expires.timeIntervalSince1970 * 1000))
        }
        response.headers.append(("Set-Cookie", cookieHeader(id, request, maxAge: Int(ConsoleSessions.lifetime))))
        return response
    }

    private func cookieHeader(_ value: String, _ request: HTTPRequest, maxAge: Int) -> String {
        "\(Self.cookieName)=\(value); Path=\(Self.prefix); Max-Age=\(maxAge); HttpOnly; SameSite=Strict"
            + (request.isTLS ? "; Secure" : "")
    }

    /// `api/schema`: `{environment, roles, recordTypes: [{name, fields: [{name, type, queryable, sortable, searchable,
    /// building, buildProgress?: {recordsDone, recordsTotal}}],
    /// grants: [{role, permissions}], systemIndexes: [{name, queryable, sortable, searchable}]}]}` (`permissions` as the
    /// schema language writes them, `READ, WRITE`; the public database's grants, CloudKit's defaults when none were set).
    private func schema(_ request: HTTPRequest) throws -> HTTPResponse {
        guard let id = request.queryParameter("container"), !id.isEmpty else {
            throw APIError.badRequest("the container query parameter is missing")
        }
        let container = try router.store.container(id)
        let env = request.queryParameter("environment") ?? "development"
        guard let environment = Environment(rawValue: env) else {
            throw APIError.badRequest("environment '\(env)' is not 'development' or 'production'")
        }
        let types = container.schema(environment: environment)
        let security = container.securityPolicy(environment: environment)
        let building = Dictionary(grouping: container.indexBuilds(environment: environment), by: \.recordType)
        func flags(_ w: inout JSONWriter, _ f: IndexFlags) {
            w.member("queryable", f.contains(.queryable))
            w.member("sortable", f.contains(.sortable))
            w.member("searchable", f.contains(.searchable))
        }
        return json { w in
            w.member("environment", environment.rawValue)
            w.key("roles")
            w.array { w in for r in security.roles.sorted() { w.string(r) } }
            w.key("recordTypes")
            w.array { w in
                for t in types {
                    w.object { w in
                        w.member("name", t.name)
                        w.key("fields")
                        w.array { w in
                            for name in t.fields.keys.sorted() {
                                w.object { w in
                                    w.member("name", name)
                                    w.member("type", t.fields[name]!.description)
                                    flags(&w, t.indexes[name] ?? [])
                                    let build = building[t.name]?.first { $0.field == name }
                                    w.member("building", build != nil)
                                    if let build, let total = build.recordsTotal {
                                        w.key("buildProgress")
                                        w.object { w in
                                            w.member("recordsDone", Int64(build.recordsDone))
                                            w.member("recordsTotal", Int64(total))
                                        }
                                    }
                                }
                            }
                        }
                        w.key("grants")
                        w.array { w in
                            let grants = security.grants(for: t.name)
                            for role in grants.keys.sorted() where !grants[role]!.isEmpty {
                                w.object { w in
                                    w.member("role", role)
                                    w.member("permissions", grants[role]!.description)
                                }
                            }
                        }
                        w.key("systemIndexes")
                        w.array { w in
                            for name in t.indexes.keys.sorted() where t.fields[name] == nil {
                                w.object { w in
                                    w.member("name", name)
                                    flags(&w, t.indexes[name]!)
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// `api/database/{container}/{environment}/{database}/{operation}`: the CloudKit operation, performed by the
    /// same handlers as `/database/1/…`, for the admin.
    private func database(_ rest: String, _ request: HTTPRequest) throws -> HTTPResponse {
        try requireMethod("POST", request, "database operations")
        let path = try DatabasePath(DatabasePath.prefix + "1/" + rest)
        guard let op = Route(operation: path.operation), Self.databaseOperations.contains(op) else {
            throw APIError("NOT_FOUND", "the console does not perform '\(path.operation)'")
        }
        let context = try self.context(path, op: op, user: request.queryParameter("user"), body: try router.body(request, op), request: request)
        return HTTPResponse(status: 200, body: try router.perform(op, context: context, request: request))
    }

    /// The context of database operation `op` performed for the admin: as the developer on the public database, as
    /// user `user` (a user name) when one is given — which a private or shared database and subscriptions need.
    func context(_ path: DatabasePath, op: Route, user: String?, body: [String: JSONValue], request: HTTPRequest) throws
        -> RequestContext
    {
        let container = try router.store.container(path.container)
        var principal = Principal(container: path.container, user: nil, keyID: "console")
        if let name = user, !name.isEmpty {
            let credentials = router.authenticator.credentials
            guard let found = try ThreadBridge.wait({ try await credentials.user(named: name) }) else {
                throw APIError("NOT_FOUND", "there is no user named '\(name)'")
            }
            principal = Principal(container: path.container, user: found)
        } else if path.scope != .public {
            throw APIError.badRequest("the \(path.scope.rawValue) database belongs to a user: pick one (user=NAME)")
        } else if op == .subscriptionsList || op == .subscriptionsLookup || op == .subscriptionsModify {
            throw APIError.badRequest("subscriptions belong to a user: pick one (user=NAME)")
        }
        return try router.context(path, container: container, principal: principal, body: body, request: request)
    }

    private func requireMethod(_ method: String, _ request: HTTPRequest, _ what: String) throws {
        guard request.method == method else { throw APIError.badRequest("\(what) takes \(method), not \(request.method)") }
    }

    private func json(_ body: (inout JSONWriter) -> Void) -> HTTPResponse {
        var w = JSONWriter()
        w.object(body)
        return HTTPResponse(status: 200, body: w.bytes)
    }
}
