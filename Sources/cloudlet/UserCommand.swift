import Cloudlet
import CloudletCommandLine
import CloudletServer
import Foundation

/// `cloudlet user add`: users, each with a private database and a web auth token (CloudKit's `ckWebAuthToken`).
enum UserCommand {
    static let help = """
        USAGE: cloudlet user <subcommand> [options]

        SUBCOMMANDS:
          add      Create a user and a web auth token for them.
          list     List users: name, userRecordName, email, discoverable [--json] [--data DIR].
          remove   Remove user NAME and their web auth tokens (their records stay in the store) [--data DIR].
          rotate   Give user NAME a new web auth token; every old one dies [--token-ttl SECONDS] [--data DIR].

        Run `cloudlet user add --help` for its options.
        """

    static let addHelp = """
        USAGE: cloudlet user add NAME [--email ADDRESS] [--discoverable] [--token-ttl SECONDS] [--data DIR]

        Creates user NAME (1–64 letters, digits, '.', '-', '_') in the store at DIR (default
        \(StoreAccess.defaultDirectory)), with a CloudKit-style userRecordName that owns their private database, and
        prints their web auth token alone on the last line. Clients send it as the ckWebAuthToken query parameter.
        Only its SHA-256 is stored: save it now, it cannot be shown again.

        --email gives the user an email address; --discoverable lets other users find them by it (or by their
        userRecordName) through users/discover and users/lookup/*. Users who are not discoverable are never found.
        --token-ttl makes the user's web auth tokens expire SECONDS after they are made; a client refreshes one
        before then with POST /cloudlet/auth/refresh?ckWebAuthToken=T (T dies, a new one comes back). Without it
        tokens live until rotated.

        The store must not be in use: stop `cloudlet serve` first.
        """

    static func run(_ args: [String]) async throws {
        guard let sub = args.first else { throw UsageError(message: "user needs a subcommand; see `cloudlet user --help`") }
        switch sub {
        case "--help", "-h", "help": say(help)
        case "add":
            let o = try CommandLineOptions(
                Array(args.dropFirst()), valued: ["--data", "--email", "--token-ttl"], flags: ["--discoverable"], positional: true,
                help: addHelp)
            let ttl = try o.integer("--token-ttl", in: 1...Int(Int32.max), "a number of seconds").map(Int64.init)
            guard o.positional.count == 1 else {
                throw UsageError(message: o.positional.isEmpty ? "user add needs a NAME" : "user add takes one NAME")
            }
            let dir = o["--data"] ?? StoreAccess.defaultDirectory
            let (user, token) = try await StoreAccess.with(dir) { store in
                try await Credentials(store: store).createUser(
                    name: o.positional[0], email: o["--email"], discoverable: o.has("--discoverable"), tokenTTL: ttl)
            }
            say("created user '\(user.name)' (userRecordName \(user.userRecordName)) in \(dir); web auth token "
                + "(only its SHA-256 is stored; save it now):")
            say(token)
        case "list":
            let o = try CommandLineOptions(Array(args.dropFirst()), valued: ["--data"], flags: ["--json"], help: help)
            let dir = o["--data"] ?? StoreAccess.defaultDirectory
            let users = try await StoreAccess.with(dir) { store in try await Credentials(store: store).users() }
            if o.has("--json") {
                say("[" + users.map { u in
                    #"{"name":"\#(u.user.name)","userRecordName":"\#(u.user.userRecordName)","email":\#(u.email.map { "\"\($0)\"" } ?? "null"),"discoverable":\#(u.discoverable)}"#
                }.joined(separator: ",") + "]")
            } else if users.isEmpty {
                say("no users")
            } else {
                for u in users {
                    say("\(u.user.name)  \(u.user.userRecordName)\(u.email.map { "  \($0)" } ?? "")\(u.discoverable ? "  discoverable" : "")")
                }
            }
        case "remove", "rotate":
            let o = try CommandLineOptions(Array(args.dropFirst()), valued: ["--data", "--token-ttl"], positional: true, help: help)
            guard o.positional.count == 1 else { throw UsageError(message: "user \(sub) takes one NAME") }
            let dir = o["--data"] ?? StoreAccess.defaultDirectory
            let name = o.positional[0]
            if sub == "remove" {
                try await StoreAccess.with(dir) { store in try await Credentials(store: store).removeUser(name) }
                say("removed user '\(name)' and their web auth tokens (their records stay in the store)")
            } else {
                let ttl = try o.integer("--token-ttl", in: 1...Int(Int32.max), "a number of seconds").map(Int64.init)
                let token = try await StoreAccess.with(dir) { store in
                    try await Credentials(store: store).rotateWebAuthToken(of: name, ttl: ttl)
                }
                say("new web auth token for '\(name)'; every older one is dead (only its SHA-256 is stored; save it now):")
                say(token)
            }
        default: throw UsageError(message: "unknown user subcommand '\(sub)'; see `cloudlet user --help`")
        }
    }
}
