/// Every route the server answers, with the label it has in metrics (a fixed set, so metrics stay bounded).
enum Route: String, CaseIterable, Sendable {
    case recordsModify = "records/modify"
    case recordsLookup = "records/lookup"
    case recordsQuery = "records/query"
    /// Cloudlet's own: how many records a query matches.
    case recordsCount = "records/count"
    case zonesList = "zones/list"
    case zonesLookup = "zones/lookup"
    case zonesModify = "zones/modify"
    case usersCaller = "users/caller"
    case usersCurrent = "users/current"
    case usersDiscover = "users/discover"
    case usersLookupEmail = "users/lookup/email"
    case usersLookupID = "users/lookup/id"
    case usersLookupContacts = "users/lookup/contacts"
    case changesZone = "changes/zone"
    case changesDatabase = "changes/database"
    case recordsChanges = "records/changes"
    case zonesChanges = "zones/changes"
    case subscriptionsList = "subscriptions/list"
    case subscriptionsLookup = "subscriptions/lookup"
    case subscriptionsModify = "subscriptions/modify"
    case tokensCreate = "tokens/create"
    /// Registers a push token for the caller (here: a web courier token; see ``NotificationCourier``).
    case tokensRegister = "tokens/register"
    /// Upload URLs for asset fields.
    case assetsUpload = "assets/upload"
    case assetsRereference = "assets/rereference"
    /// Share metadata by short GUID (public database).
    case recordsResolve = "records/resolve"
    /// Accepts shares by short GUID (public database).
    case recordsAccept = "records/accept"
    /// `POST` of a file to an upload URL, `GET` of a download URL.
    case assetUploadFile = "cloudlet/assets/upload"
    case assetDownload = "cloudlet/assets/download"
    case notificationsPoll = "cloudlet/notifications/poll"
    case health = "cloudlet/health"
    /// A share's URL (`/share/<shortGUID>`): where to resolve and accept it.
    case shareLink = "share"
    case metrics = "cloudlet/metrics"
    case signIn = "cloudlet/signin"
    /// Exchanges a web auth token for a new one (``Credentials/refreshWebAuthToken(_:)``).
    case authRefresh = "cloudlet/auth/refresh"
    case adminSchemaExport = "cloudlet/admin/schema/export"
    case adminSchemaImport = "cloudlet/admin/schema/import"
    case adminSchemaDeploy = "cloudlet/admin/schema/deploy"
    case adminSchemaReset = "cloudlet/admin/schema/reset"
    case adminQueryExplain = "cloudlet/admin/query/explain"
    case adminRolesList = "cloudlet/admin/roles/list"
    case adminRolesAddMember = "cloudlet/admin/roles/add-member"
    case adminRolesRemoveMember = "cloudlet/admin/roles/remove-member"
    case adminTokensList = "cloudlet/admin/tokens/list"
    case adminTokensRevoke = "cloudlet/admin/tokens/revoke"
    case adminUsersList = "cloudlet/admin/users/list"
    case adminUsersRemove = "cloudlet/admin/users/remove"
    case adminUsersRotate = "cloudlet/admin/users/rotate"
    case adminKeysList = "cloudlet/admin/keys/list"
    case adminKeysRevoke = "cloudlet/admin/keys/revoke"
    /// The console's pages and files (``ConsoleHandler``).
    case console = "cloudlet/console"
    /// The console's JSON API.
    case consoleAPI = "cloudlet/console/api"
    /// Anything else (unknown paths and operations).
    case unmatched

    /// The CloudKit operations under `/database/1/{container}/{environment}/{database}/`.
    static let databaseOperations: [Route] = [
        .recordsModify, .recordsLookup, .recordsQuery, .recordsCount, .zonesList, .zonesLookup, .zonesModify,
        .usersCaller, .usersCurrent, .usersDiscover, .usersLookupEmail, .usersLookupID, .usersLookupContacts, .changesZone, .changesDatabase, .recordsChanges, .zonesChanges,
        .subscriptionsList, .subscriptionsLookup, .subscriptionsModify, .tokensCreate, .tokensRegister, .assetsUpload,
        .assetsRereference, .recordsResolve, .recordsAccept,
    ]

    /// The operation named by the path after the database segment (`records/modify`), if we serve it.
    init?(operation: String) {
        guard let r = Route(rawValue: operation), Self.databaseOperations.contains(r) else { return nil }
        self = r
    }

    /// CloudKit documents `zones/list` and `users/*` as GET and the rest as POST; the GET ones also accept POST
    /// (some clients send everything as POST).
    var methods: [String] {
        switch self {
        case .zonesList, .usersCaller, .usersCurrent, .usersDiscover, .health, .metrics, .signIn, .subscriptionsList, .notificationsPoll,
            .shareLink, .adminSchemaExport, .adminRolesList, .adminTokensList, .adminUsersList, .adminKeysList:
            ["GET", "POST"]
        default: ["POST"]
        }
    }

    /// Whether the operation changes data (a public-database write needs a signed-in user).
    var isWrite: Bool {
        self == .recordsModify || self == .zonesModify || self == .subscriptionsModify || self == .assetsUpload
            || self == .assetsRereference
    }

    /// `users/*`: about users, so for a signed-in user.
    var isAboutUsers: Bool { rawValue.hasPrefix("users/") }

    /// Whether the request body is a JSON object the operation reads.
    var hasBody: Bool { methods == ["POST"] }
}
