import CloudletWire
import Cloudlet

/// What a database operation works on: the database the path and the caller select, and the request body.
struct RequestContext: Sendable {
    let path: DatabasePath
    let principal: Principal
    let container: Container
    /// The public database, or the caller's own private or shared one: never another user's, whatever zone
    /// owner a request names (the engine resolves owners against this handle).
    let database: Database
    /// The request body (an empty object for bodiless GETs).
    let body: [String: JSONValue]
    /// The byte budget of the response's records (``ServerConfiguration/responseBudget``).
    let responseBudget: Int
    /// Where the URLs in answers point (asset, share and sign-in URLs); nil in tests of other handlers. Read only
    /// by the answers that carry a URL, not by every request.
    let origin: ServerOrigin?
    /// `scheme://host[:port][/prefix]` of the URLs this server hands out ("" without an ``origin``).
    var baseURL: String { origin?.text ?? "" }
    /// Who share dictionaries are written for (`currentUserParticipant`, `url`).
    var shareViewer: ShareCoding.Viewer { ShareCoding.Viewer(caller: principal.access.userRecordName, baseURL: baseURL) }
    /// Signs and checks asset URLs and receipts; nil where assets are not served (tests of other handlers).
    let assets: AssetTransfer?
    /// Each user's storage quota; nil: none.
    var quota: UserQuota? = nil
    /// The users (to find a share's participants by email address); nil in tests of other handlers.
    var credentials: Credentials? = nil

    init(
        path: DatabasePath, container: Container, principal: Principal, body: [String: JSONValue],
        responseBudget: Int = ServerConfiguration.defaultResponseBudget, origin: ServerOrigin? = nil, assets: AssetTransfer? = nil
    ) throws {
        self.path = path
        self.origin = origin
        self.assets = assets
        self.responseBudget = responseBudget
        self.container = container
        self.principal = principal
        self.body = body
        // The engine checks the caller against the database on every call; the router has already answered a
        // missing user with AUTHENTICATION_REQUIRED and its sign-in redirect.
        database = try container.database(path.scope, access: principal.access, environment: path.environment)
    }
}

extension RequestContext {
    /// The `downloadURL`s of the assets a response carries.
    var assetLinks: AssetLinks? { assets?.links(self) }
}
