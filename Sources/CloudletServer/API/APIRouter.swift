import CloudletConcurrency
import CloudletWire
import Cloudlet
import Foundation

/// Answers every request: CloudKit operations under `/database/1/…`, our own endpoints under `/cloudlet/…`.
/// Counts each request in ``Metrics`` and writes one access-log line.
///
/// A database request goes through, in order: the path (`BAD_REQUEST` for a bad version, environment or database),
/// the operation (`NOT_FOUND` for one we do not serve), the method, the body size (413), the container identifier
/// (`BAD_REQUEST`), the API token and container (see ``Authenticator``), the user (`AUTHENTICATION_REQUIRED` with a `redirectURL` for the
/// private and shared databases, public writes and `users/*`), the JSON body, then the operation.
final class APIRouter: Sendable {
    let store: CloudletStore
    let authenticator: Authenticator
    let metrics = Metrics()
    let log: RequestLog?
    let maxBodySize: Int
    let responseBudget: Int
    let courier: NotificationCourier
    /// Where the URLs in answers point (``ServerConfiguration/publicURL``, else the listening address).
    let origin: ServerOrigin
    let assets: AssetTransfer
    /// Per-caller request rate limits; nil: none (``ServerConfiguration/rateLimit``).
    let limiter: RateLimiter?
    /// Each user's storage quota; nil: none (``ServerConfiguration/userQuota``).
    let quota: UserQuota?
    /// ``ServerConfiguration/additionalMetrics``.
    let additionalMetrics: (@Sendable () -> String)?

    init(store: CloudletStore, configuration: ServerConfiguration) throws {
        self.store = store
        authenticator = Authenticator(credentials: Credentials(store: store))
        log = configuration.log.map(RequestLog.init)
        maxBodySize = configuration.maxBodySize
        responseBudget = configuration.responseBudget
        let origin = ServerOrigin(configuration)
        self.origin = origin
        courier = NotificationCourier(
            store: store, origin: origin,
            tokens: CourierTokens(
                lifetime: configuration.courierTokenLifetime, perInboxCap: configuration.courierTokensPerUser,
                now: configuration.courierClock))
        let quota = configuration.userQuota.map { UserQuota(bytes: $0) }
        self.quota = quota
        assets = try AssetTransfer(store: store, configuration: configuration, quota: quota)
        limiter = configuration.rateLimit.map { RateLimiter($0) }
        additionalMetrics = configuration.additionalMetrics
    }

    /// The Prometheus text of `/cloudlet/metrics` (and the console's `api/metrics`): the server's and store's
    /// metrics and ``additionalMetrics``.
    func metricsResponse() -> HTTPResponse {
        .text(metrics.render(store: store.statistics) + (additionalMetrics?() ?? ""), contentType: "text/plain; version=0.0.4")
    }

    func handle(_ request: HTTPRequest) -> HTTPResponse {
        metrics.begin()
        let (route, first) = dispatch(request)
        var response = first
        if let later = response.later {  // counted and logged once answered
            response.later = { [self] in
                let answer = await later()
                finish(request, route: route, status: answer.status)
                return answer
            }
            return response
        }
        finish(request, route: route, status: response.status)
        return response
    }

    private func finish(_ request: HTTPRequest, route: Route, status: Int) {
        let elapsed = ContinuousClock.now - request.received
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        metrics.end(route, status: status, seconds: seconds)
        log?.record(request, status: status, seconds: seconds)
    }

    private func dispatch(_ request: HTTPRequest) -> (Route, HTTPResponse) {
        if request.path.hasPrefix(DatabasePath.prefix) { return database(request) }
        if request.path.hasPrefix(AssetTransfer.uploadPrefix) {
            let answer = assets.upload(request)
            if answer.status == 413, quota != nil,
                (try? JSONParser.parse(answer.body))?["serverErrorCode"]?.stringValue == "QUOTA_EXCEEDED"
            {
                metrics.quotaExceeded()
            }
            return (.assetUploadFile, answer)
        }
        if request.path.hasPrefix(AssetTransfer.downloadPrefix) { return (.assetDownload, assets.download(request)) }
        if request.path.hasPrefix("/share/") { return (.shareLink, shareLink(request)) }
        if request.path.hasPrefix(ConsoleHandler.prefix) { return ConsoleHandler(router: self).respond(request) }
        if let admin = Route(rawValue: String(request.path.dropFirst())), admin.rawValue.hasPrefix("cloudlet/admin/") {
            return (admin, AdminHandler(store: store, authenticator: authenticator).respond(request, route: admin))
        }
        switch request.path {
        case "/cloudlet/health": return (.health, health())
        case "/cloudlet/metrics":
            // Admin-only: per-route counts and store sizes are not for the world (docs/access-control.md).
            do { try authenticator.authenticateAdmin(request, for: "/cloudlet/metrics") } catch let e as APIError {
                return (.metrics, e.response)
            } catch { return (.metrics, APIError(answering: error).response) }
            return (.metrics, metricsResponse())
        case "/cloudlet/signin": return (.signIn, signIn(request))
        case "/cloudlet/auth/refresh": return (.authRefresh, refresh(request))
        case "/cloudlet/notifications/poll": return (.notificationsPoll, courier.poll(request))
        default:
            return (
                .unmatched,
                APIError(
                    "NOT_FOUND",
                    "no endpoint at '\(request.path)': CloudKit operations are under /database/1/{container}/"
                        + "{environment}/{database}/, Cloudlet's own under /cloudlet/ (health, metrics)"
                ).response
            )
        }
    }

    private func database(_ request: HTTPRequest) -> (Route, HTTPResponse) {
        var route = Route.unmatched
        do {
            let path = try DatabasePath(request.path)
            guard let op = Route(operation: path.operation) else {
                throw APIError(
                    "NOT_FOUND",
                    "operation '\(path.operation)' is not supported by this server (supported: "
                        + Route.databaseOperations.map(\.rawValue).joined(separator: ", ") + ")")
            }
            route = op
            guard op.methods.contains(request.method) else {
                throw APIError.badRequest("\(op.rawValue) takes \(op.methods.joined(separator: " or ")), not \(request.method)")
            }
            if let length = request.oversizedBodyLength {
                throw APIError(
                    "BAD_REQUEST", "the request body is \(length) bytes; the limit is \(maxBodySize) bytes", status: 413)
            }
            let container = try store.container(path.container)  // BAD_REQUEST for a malformed identifier
            let principal = try authenticator.authenticate(request, container: path.container)
            if let limiter, let wait = limiter.admit(principal.rateKey(request)) {
                metrics.throttled()
                var e = APIError("THROTTLED", "too many requests from \(principal.access); try again in \(Int(wait.rounded(.up))) s")
                e.retryAfter = wait
                throw e
            }
            let needsUser = path.scope != .public || op.isWrite || op.isAboutUsers
                || op == .tokensCreate || op == .tokensRegister || op == .subscriptionsList || op == .subscriptionsLookup
                || op == .recordsResolve || op == .recordsAccept
            if principal.keyID != nil {
                // A server-to-server key is the developer on the public database, and no user.
                guard path.scope == .public else {
                    throw APIError("ACCESS_DENIED", "server-to-server keys act on the public database only, not the \(path.scope.rawValue) database")
                }
                let userOnly: Set<Route> = [
                    .tokensCreate, .tokensRegister, .subscriptionsList, .subscriptionsLookup, .subscriptionsModify, .recordsResolve,
                    .recordsAccept,
                ]
                guard !userOnly.contains(op) && !op.isAboutUsers else {
                    throw APIError("ACCESS_DENIED", "\(op.rawValue) belongs to a signed-in user, not a server-to-server key")
                }
            } else if needsUser && principal.user == nil {
                let what = path.scope != .public ? "the \(path.scope.rawValue) database" : op.isWrite ? "writing to the public database" : op.rawValue
                throw APIError(
                    "AUTHENTICATION_REQUIRED", "\(what) needs a signed-in user: add the ckWebAuthToken query parameter",
                    redirectURL: signInURL(container: path.container))
            }
            let context = try self.context(path, container: container, principal: principal, body: try body(request, op), request: request)
            let bytes = try perform(op, context: context, request: request)
            return (route, HTTPResponse(status: 200, body: bytes))
        } catch {
            let e = APIError(answering: error)
            if e.serverErrorCode == "QUOTA_EXCEEDED" { metrics.quotaExceeded() }
            return (route, e.response)
        }
    }

    /// Performs database operation `op` for the caller and database of `context` (the CloudKit route after its
    /// checks, and the console, which acts for the admin): the response body.
    func perform(_ op: Route, context: RequestContext, request: HTTPRequest) throws -> [UInt8] {
        switch op {
        case .recordsModify: return try RecordsHandler(context: context).modify()
        case .recordsLookup: return try RecordsHandler(context: context).lookup()
        case .recordsQuery: return try QueryHandler(context: context).query()
        case .recordsCount: return try QueryHandler(context: context).count()
        case .zonesList: return try ZonesHandler(context: context).list()
        case .zonesLookup: return try ZonesHandler(context: context).lookup()
        case .zonesModify: return try ZonesHandler(context: context).modify()
        case .usersCaller: return UsersHandler(user: context.principal.user!).caller()
        case .usersCurrent: return UsersHandler(user: context.principal.user!).current()
        case .usersDiscover, .usersLookupEmail, .usersLookupID, .usersLookupContacts:
            return try UsersHandler(user: context.principal.user!).discover(op, body: context.body, credentials: authenticator.credentials)
        case .changesZone: return try ChangesHandler(context: context).zone()
        case .recordsChanges: return try ChangesHandler(context: context).records()
        case .changesDatabase, .zonesChanges: return try ChangesHandler(context: context).database()
        case .subscriptionsList: return try SubscriptionsHandler(context: context).list()
        case .subscriptionsLookup: return try SubscriptionsHandler(context: context).lookup()
        case .subscriptionsModify: return try SubscriptionsHandler(context: context).modify()
        case .tokensCreate: return try courier.createToken(context)
        case .tokensRegister: return try courier.registerToken(context)
        case .assetsUpload: return try assets.uploadURLs(context)
        case .assetsRereference: return try assets.rereference(context)
        case .recordsResolve: return try SharesHandler(context: context).resolve()
        case .recordsAccept: return try SharesHandler(context: context).accept()
        default: preconditionFailure("\(op) is not a database operation")
        }
    }

    /// The context a database operation runs in, for `principal` on `path`'s database of `container`: the server's
    /// response budget, asset URLs, users' storage quota and credentials. The CloudKit route builds it after its
    /// checks; the console for the admin (``ConsoleHandler/context(_:op:user:body:request:)``).
    func context(
        _ path: DatabasePath, container: Container, principal: Principal, body: [String: JSONValue], request: HTTPRequest
    ) throws -> RequestContext {
        var context = try RequestContext(
            path: path, container: container, principal: principal, body: body, responseBudget: responseBudget,
            origin: origin, assets: assets)
        context.quota = quota
        context.credentials = authenticator.credentials
        return context
    }

    /// The JSON object in the body; an empty object for operations without a body (and an empty GET).
    func body(_ request: HTTPRequest, _ op: Route) throws -> [String: JSONValue] {
        if request.body.isEmpty {
            guard !op.hasBody else { throw APIError.badRequest("the request body is empty; \(op.rawValue) takes a JSON object") }
            return [:]
        }
        let json: JSONValue
        do { json = try JSONParser.parse(request.body) } catch {
            throw APIError.badRequest("the request body is not valid JSON: \(error)")
        }
        return try json.requireObject(at: "")
    }

    /// `GET /share/<shortGUID>`, a share's URL → `{shortGUID, containerIdentifier, environment, resolveURL, acceptURL}`:
    /// the `records/resolve` and `records/accept` routes a signed-in user posts the short GUID to. It says nothing of
    /// the share itself; an unknown short GUID is `NOT_FOUND`.
    private func shareLink(_ request: HTTPRequest) -> HTTPResponse {
        let guid = String(request.path.dropFirst("/share/".count))
        guard request.method == "GET" || request.method == "POST" else {
            return APIError.badRequest("a share's URL takes GET, not \(request.method)").response
        }
        guard let (container, environment) = store.shareLocation(shortGUID: guid) else {
            return APIError("NOT_FOUND", "no share has short GUID '\(guid)'").response
        }
        let base = "\(baseURL)/database/1/\(container)/\(environment.rawValue)/public/records/"
        var w = JSONWriter()
        w.object { w in
            w.member("shortGUID", guid)
            w.member("containerIdentifier", container)
            w.member("environment", environment.rawValue)
            w.member("resolveURL", base + "resolve")
            w.member("acceptURL", base + "accept")
        }
        return HTTPResponse(status: 200, body: w.bytes)
    }

    private func health() -> HTTPResponse {
        var w = JSONWriter()
        w.object { w in
            w.member("status", "ok")
            w.member("storeID", store.metadata.storeID)
            w.member("uptimeSeconds", metrics.uptimeSeconds)
        }
        return HTTPResponse(status: 200, body: w.bytes)
    }

    /// `scheme://host[:port][/prefix]` of the URLs this server hands out (``origin``; never the `Host` header).
    var baseURL: String { origin.text }

    /// Where `AUTHENTICATION_REQUIRED` sends a client: this server's sign-in page.
    private func signInURL(container: String) -> String {
        let c = container.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? container
        return "\(baseURL)/cloudlet/signin?container=\(c)"
    }

    /// `POST /cloudlet/auth/refresh?ckWebAuthToken=T` → `{ckWebAuthToken, expires?}`: a new token for the same user
    /// (with the user's token lifetime from now); T is dead from then on. An unknown or expired T is
    /// `AUTHENTICATION_FAILED`.
    private func refresh(_ request: HTTPRequest) -> HTTPResponse {
        guard request.method == "POST" else { return APIError.badRequest("cloudlet/auth/refresh takes POST, not \(request.method)").response }
        guard let old = request.queryParameter("ckWebAuthToken"), !old.isEmpty else {
            return APIError("AUTHENTICATION_FAILED", "the ckWebAuthToken query parameter is missing").response
        }
        let credentials = authenticator.credentials
        do {
            let (token, expires) = try ThreadBridge.wait { try await credentials.refreshWebAuthToken(old) }
            authenticator.forget()
            var w = JSONWriter()
            w.object { w in
                w.member("ckWebAuthToken", token)
                if let expires { w.member("expires", expires) }
            }
            return HTTPResponse(status: 200, body: w.bytes)
        } catch {
            return APIError(answering: error).response
        }
    }

    /// Cloudlet has no interactive sign-in: this page says how to get a web auth token.
    private func signIn(_ request: HTTPRequest) -> HTTPResponse {
        .text(
            """
            Cloudlet has no interactive sign-in page.

            Users are created by the server's administrator on the server's data directory (with the server stopped):

                cloudlet user add NAME --data DIR

            which prints the user's web auth token. Send it as the ckWebAuthToken query parameter together with
            ckAPIToken (from `cloudlet token add --data DIR --container ID`).

            """)
    }
}
