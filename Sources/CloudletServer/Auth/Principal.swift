import Cloudlet

/// Who is calling: the container their API token grants, and the user their web auth token names (if any) — or a
/// server-to-server key (or an admin explaining a query), which acts as the developer.
struct Principal: Sendable {
    var container: String
    var user: Credentials.User?
    /// The server-to-server key's ID: the developer, on the public database only.
    var keyID: String? = nil

    /// The caller as the engine checks it: the key, the signed-in user, or anonymous with the API token alone.
    var access: AccessContext {
        if let keyID { return AccessContext(.serverKey(keyID)) }
        return user.map { .user($0.userRecordName) } ?? .anonymous
    }

    /// Whom a rate limit counts this request against: the user, the key, or the API token used alone.
    func rateKey(_ request: HTTPRequest) -> String {
        if let keyID { return "key:" + keyID }
        if let user { return "user:" + user.userRecordName }
        return "api:" + Secrets.fingerprint(request.queryParameter("ckAPIToken") ?? "")
    }
}
