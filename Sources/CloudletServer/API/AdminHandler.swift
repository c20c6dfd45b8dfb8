import CloudletConcurrency
import CloudletWire
import Cloudlet

/// Cloudlet's administration endpoints, under `/cloudlet/admin/`:
///
/// | Path | Method | Body | Response |
/// |---|---|---|---|
/// | `schema/export` | GET or POST | — | the schema as text (CloudKit Schema Language) |
/// | `schema/import` | POST | schema text | `{recordTypes, fields, indexes, ignored}` added to development |
/// | `schema/deploy` | POST | — | `{changes}`: development promoted to production |
/// | `schema/reset` | POST | — | `{status: "ok"}`: development reset to production |
/// | `query/explain` | POST | a `records/query` body | the planner's plan (see ``QueryHandler/explain()``) |
///
/// Query parameters: `container` (required), `ckAPIToken` (an API token of that container) and `ckWebAuthToken`
/// (any user's web auth token), both required; `environment` (`development`, the default, or `production`) for
/// `schema/export` and `query/explain`; `database` (`private`, the default, `public` or `shared`) for
/// `query/explain`. Without a user: `AUTHENTICATION_REQUIRED` (421).
struct AdminHandler {
    let store: CloudletStore
    let authenticator: Authenticator

    /// The response to an admin request, errors included.
    func respond(_ request: HTTPRequest, route: Route) -> HTTPResponse {
        do {
            if let length = request.oversizedBodyLength {
                throw APIError("BAD_REQUEST", "the request body is \(length) bytes, over the limit", status: 413)
            }
            return try handle(request, route: route)
        } catch let e as APIError {
            return e.response
        } catch let e as CloudletError {
            return APIError(e).response
        } catch {
            return APIError("INTERNAL_ERROR", "\(error)").response
        }
    }

    private func handle(_ request: HTTPRequest, route: Route) throws -> HTTPResponse {
        guard route.methods.contains(request.method) else {
            throw APIError.badRequest("\(route.rawValue) takes \(route.methods.joined(separator: " or ")), not \(request.method)")
        }
        guard let id = request.queryParameter("container"), !id.isEmpty else {
            throw APIError.badRequest("the container query parameter is missing (?container=iCloud.com.example.app)")
        }
        let container = try store.container(id)
        let principal = try authenticator.authenticate(request, container: id)
        guard principal.user != nil else {
            throw APIError(
                "AUTHENTICATION_REQUIRED", "\(route.rawValue) needs a signed-in user: add the ckWebAuthToken query parameter")
        }
        let environment = try self.environment(request)
        switch route {
        case .adminSchemaExport:
            return .text(container.exportSchema(environment: environment))
        case .adminSchemaImport:
            let text = String(decoding: request.body, as: UTF8.self)
            let result = try ThreadBridge.wait { try await container.importSchema(text) }
            var w = JSONWriter()
            w.object { w in
                for (k, v) in [
                    ("recordTypes", result.recordTypes), ("fields", result.fields), ("indexes", result.indexes),
                    ("ignored", result.ignored),
                ] {
                    w.key(k)
                    w.array { w in for s in v { w.string(s) } }
                }
            }
            return HTTPResponse(status: 200, body: w.bytes)
        case .adminSchemaDeploy:
            let n = try ThreadBridge.wait { try await container.deploySchema() }
            var w = JSONWriter()
            w.object { w in w.member("changes", Int64(n)) }
            return HTTPResponse(status: 200, body: w.bytes)
        case .adminSchemaReset:
            try ThreadBridge.wait { try await container.resetDevelopmentSchema() }
            var w = JSONWriter()
            w.object { w in w.member("status", "ok") }
            return HTTPResponse(status: 200, body: w.bytes)
        case .adminQueryExplain:
            let db = request.queryParameter("database") ?? "private"
            let path = try DatabasePath("/database/1/\(id)/\(environment.rawValue)/\(db)/query/explain")
            let body: [String: JSONValue]
            do { body = try JSONParser.parse(request.body).requireObject(at: "") } catch let e as APIError {
                throw e
            } catch {
                throw APIError.badRequest("the request body is not valid JSON: \(error)")
            }
            let context = try RequestContext(path: path, container: container, principal: principal, body: body)
            return HTTPResponse(status: 200, body: try QueryHandler(context: context).explain())
        default:
            preconditionFailure("\(route) is not an admin route")
        }
    }

    private func environment(_ request: HTTPRequest) throws -> Environment {
        guard let e = request.queryParameter("environment") else { return .development }
        guard let env = Environment(rawValue: e) else {
            throw APIError.badRequest("environment '\(e)' is not 'development' or 'production'")
        }
        return env
    }
}
