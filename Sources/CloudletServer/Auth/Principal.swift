/// Who is calling: the container their API token grants, and the user their web auth token names (if any).
struct Principal: Sendable {
    var container: String
    var user: Credentials.User?
}
