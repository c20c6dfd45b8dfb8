import CloudletConcurrency
import CloudletWire
import Cloudlet

/// Cloudlet's administration endpoints, under `/cloudlet/admin/`:
///
/// | Path | Method | Body | Response |
/// |---|---|---|---|
/// | `schema/export` | GET or POST | — | the schema as text (CloudKit Schema Language) |
/// | `schema/import` | POST | schema text | `{recordTypes, fields, indexes, roles, grants, ignored}` added to development |
/// | `schema/deploy` | POST | — | `{changes}`: development promoted to production |
/// | `schema/reset` | POST | — | `{status: "ok"}`: development reset to production |
/// | `query/explain` | POST | a `records/query` body | the planner's plan (see ``QueryHandler/explain()``) |
/// | `roles/list` | GET or POST | — | `{roles: [{name, environments, members}]}`: custom roles and their members |
/// | `roles/add-member`, `roles/remove-member` | POST | — | `{role, members}` after the change (`role`, `user` parameters) |
/// | `tokens/list`, `tokens/revoke`, `users/list`, `users/remove`, `users/rotate`, `keys/list`, `keys/revoke` | see ``lifecycle(_:route:)`` | | |
///
/// Every route needs an **admin credential** (``Authenticator/authenticateAdmin(_:for:)``): a user's web auth token
/// or an API token alone gets `ACCESS_DENIED`. Query parameters: `container` (required); `environment`
/// (`development`, the default, or `production`) for `schema/export` and `query/explain`; `database` (`public`, the
/// default, `private` or `shared`, exactly) and, for a private or shared database, `user` (a user name) for
/// `query/explain`; `role` and `user` (a user name) for the role routes.
struct AdminHandler {
    let store: CloudletStore
    let authenticator: Authenticator

    /// The response to an admin request, errors included. `signedIn`: the caller was already checked to be the
    /// admin (a console session, which only an admin credential opens); otherwise the request must carry one.
    func respond(_ request: HTTPRequest, route: Route, signedIn: Bool = false) -> HTTPResponse {
        do {
            if let length = request.oversizedBodyLength {
                throw APIError("BAD_REQUEST", "the request body is \(length) bytes, over the limit", status: 413)
            }
            return try handle(request, route: route, signedIn: signedIn)
        } catch {
            return APIError(answering: error).response
        }
    }

    private func handle(_ request: HTTPRequest, route: Route, signedIn: Bool) throws -> HTTPResponse {
        guard route.methods.contains(request.method) else {
            throw APIError.badRequest("\(route.rawValue) takes \(route.methods.joined(separator: " or ")), not \(request.method)")
        }
        if !signedIn { try authenticator.authenticateAdmin(request, for: route.rawValue) }
        if let response = try lifecycle(request, route: route) { return response }
        guard let id = request.queryParameter("container"), !id.isEmpty else {
            throw APIError.badRequest("the container query parameter is missing (?container=iCloud.com.example.app)")
        }
        let container = try store.container(id)
        let environment = try self.environment(request)
        switch route {
        case .adminSchemaExport:
            return .text(container.exportSchema(environment: environment))
        case .adminSchemaImport:
            let text = String(decoding: request.body, as: UTF8.self)
            let result = try ThreadBridge.wait { try await container.importSchema(text) }
            return json { w in
                for (k, v) in [
                    ("recordTypes", result.recordTypes), ("fields", result.fields), ("indexes", result.indexes),
                    ("roles", result.roles), ("grants", result.grants), ("ignored", result.ignored),
                ] {
                    w.key(k)
                    w.array { w in for s in v { w.string(s) } }
                }
            }
        case .adminSchemaDeploy:
            let n = try ThreadBridge.wait { try await container.deploySchema() }
            return json { w in w.member("changes", Int64(n)) }
        case .adminSchemaReset:
            try ThreadBridge.wait { try await container.resetDevelopmentSchema() }
            return json { w in w.member("status", "ok") }
        case .adminQueryExplain:
            return try explain(request, container: container, environment: environment)
        case .adminRolesList:
            let members = container.roleMembers()
            let declared = Environment.allCases.map { ($0, container.securityPolicy(environment: $0).roles) }
            let names = Set(declared.flatMap(\.1)).union(members.keys).sorted()
            return list("roles", names) { w, name in
                w.member("name", name)
                w.key("environments")
                w.array { w in for (env, roles) in declared where roles.contains(name) { w.string(env.rawValue) } }
                w.key("members")
                w.array { w in for m in members[name] ?? [] { w.string(m) } }
            }
        case .adminRolesAddMember, .adminRolesRemoveMember:
            let role = try required(request, "role")
            let userName = try required(request, "user")
            let credentials = Credentials(store: store)
            guard let user = try ThreadBridge.wait({ try await credentials.user(named: userName) }) else {
                throw APIError("NOT_FOUND", "there is no user named '\(userName)'")
            }
            let adding = route == .adminRolesAddMember
            try ThreadBridge.wait {
                if adding {
                    try await container.addRoleMember(user.userRecordName, role: role)
                } else {
                    try await container.removeRoleMember(user.userRecordName, role: role)
                }
            }
            return json { w in
                w.member("role", role)
                w.key("members")
                w.array { w in for m in container.roleMembers()[role] ?? [] { w.string(m) } }
            }
        default:
            preconditionFailure("\(route) is not an admin route")
        }
    }

    /// The token and user routes (no container): `tokens/list` → `{tokens: [{kind, id, container?, created}]}`,
    /// `tokens/revoke?id=` → `{revoked}`, `users/list` → `{users: [{name, userRecordName, email?, discoverable}]}`,
    /// `users/remove?user=` → `{removed}`, `users/rotate?user=[&ttl=seconds]` → `{user, ckWebAuthToken}` (the old
    /// tokens are dead at once: the server forgets every token it had found), `keys/list[?container=]` → `{keys:
    /// [{keyID, container, revoked}]}`, `keys/revoke?keyID=` → `{revoked}` (keys are looked up on every request:
    /// dead at once). Nil for any other route.
    private func lifecycle(_ request: HTTPRequest, route: Route) throws -> HTTPResponse? {
        let credentials = Credentials(store: store)
        switch route {
        case .adminTokensList:
            let tokens = try ThreadBridge.wait { try await credentials.tokens() }
            return list("tokens", tokens) { w, t in
                w.member("kind", t.kind.rawValue)
                w.member("id", t.id)
                if let c = t.container { w.member("container", c) }
                if let created = t.created { w.member("created", created) }
            }
        case .adminTokensRevoke:
            let id = try required(request, "id")
            try ThreadBridge.wait { try await credentials.revokeToken(id) }
            authenticator.forget()
            // The revoked token may be the admin credential a console session was opened with: end them all.
            authenticator.consoleSessions.removeAll()
            return json { w in w.member("revoked", id) }
        case .adminUsersList:
            let users = try ThreadBridge.wait { try await credentials.users() }
            return list("users", users) { w, u in
                w.member("name", u.user.name)
                w.member("userRecordName", u.user.userRecordName)
                if let e = u.email { w.member("email", e) }
                w.member("discoverable", u.discoverable)
            }
        case .adminUsersRemove:
            let name = try required(request, "user")
            try ThreadBridge.wait { try await credentials.removeUser(name) }
            authenticator.forget()
            return json { w in w.member("removed", name) }
        case .adminUsersRotate:
            let name = try required(request, "user")
            let ttl = try request.queryParameter("ttl").map { t -> Int64 in
                guard let v = Int64(t), v > 0 else { throw APIError.badRequest("ttl '\(t)' is not a positive number of seconds") }
                return v
            }
            let token = try ThreadBridge.wait { try await credentials.rotateWebAuthToken(of: name, ttl: ttl) }
            authenticator.forget()
            return json { w in
                w.member("user", name)
                w.member("ckWebAuthToken", token)
            }
        case .adminKeysList:
            let keys = try ThreadBridge.wait { try await credentials.serverKeys(container: request.queryParameter("container")) }
            return list("keys", keys) { w, k in
                w.member("keyID", k.keyID)
                w.member("container", k.container)
                w.member("revoked", k.revoked)
            }
        case .adminKeysRevoke:
            let id = try required(request, "keyID")
            try ThreadBridge.wait { try await credentials.revokeServerKey(id) }
            return json { w in w.member("revoked", id) }
        default:
            return nil
        }
    }

    /// `query/explain` on the database the `database` parameter names exactly (`public`, the default, `private` or
    /// `shared`); a private or shared database is the one of the user the `user` parameter names. Explains as the
    /// developer on the public database.
    private func explain(_ request: HTTPRequest, container: Container, environment: Environment) throws -> HTTPResponse {
        let db = request.queryParameter("database") ?? "public"
        guard let scope = DatabaseScope(rawValue: db) else {
            throw APIError.badRequest("database '\(db)' is not 'public', 'private' or 'shared'")
        }
        var principal = Principal(container: container.identifier, user: nil, keyID: "admin")
        if scope != .public {
            let userName = try required(request, "user")
            let credentials = Credentials(store: store)
            guard let user = try ThreadBridge.wait({ try await credentials.user(named: userName) }) else {
                throw APIError("NOT_FOUND", "there is no user named '\(userName)'")
            }
            principal = Principal(container: container.identifier, user: user)
        }
        let path = DatabasePath(container: container.identifier, environment: environment, scope: scope, operation: "query/explain")
        let body: [String: JSONValue]
        do { body = try JSONParser.parse(request.body).requireObject(at: "") } catch let e as APIError {
            throw e
        } catch {
            throw APIError.badRequest("the request body is not valid JSON: \(error)")
        }
        let context = try RequestContext(path: path, container: container, principal: principal, body: body)
        return HTTPResponse(status: 200, body: try QueryHandler(context: context).explain())
    }

    private func required(_ request: HTTPRequest, _ name: String) throws -> String {
        guard let v = request.queryParameter(name), !v.isEmpty else {
            throw APIError.badRequest("the \(name) query parameter is missing")
        }
        return v
    }

    /// `{key: [{…}, …]}`, one object per item.
    private func list<T>(_ key: String, _ items: [T], _ item: (inout JSONWriter, T) -> Void) -> HTTPResponse {
        json { w in
            w.key(key)
            w.array { w in for x in items { w.object { w in item(&w, x) } } }
        }
    }

    private func json(_ body: (inout JSONWriter) -> Void) -> HTTPResponse {
        var w = JSONWriter()
        w.object(body)
        return HTTPResponse(status: 200, body: w.bytes)
    }

    private func environment(_ request: HTTPRequest) throws -> Environment {
        guard let e = request.queryParameter("environment") else { return .development }
        guard let env = Environment(rawValue: e) else {
            throw APIError.badRequest("environment '\(e)' is not 'development' or 'production'")
        }
        return env
    }
}
