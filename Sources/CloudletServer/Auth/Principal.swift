import Cloudlet

/// Who is calling: the container their API token grants, and the user their web auth token names (if any).
struct Principal: Sendable {
    var container: String
    var user: Credentials.User?

    /// The caller as the engine checks it: the signed-in user, or anonymous with the API token alone.
    var access: AccessContext { user.map { .user($0.userRecordName) } ?? .anonymous }
}
