import Cloudlet
import CloudletCommandLine
import CloudletServer
import Foundation

/// `cloudlet user add`: users, each with a private database and a web auth token (CloudKit's `ckWebAuthToken`).
enum UserCommand {
    static let help = """
        USAGE: cloudlet user <subcommand> [options]

        SUBCOMMANDS:
          add    Create a user and a web auth token for them.

        Run `cloudlet user add --help` for its options.
        """

    static let addHelp = """
        USAGE: cloudlet user add NAME [--email ADDRESS] [--discoverable] [--data DIR]

        Creates user NAME (1–64 letters, digits, '.', '-', '_') in the store at DIR (default
        \(StoreAccess.defaultDirectory)), with a CloudKit-style userRecordName that owns their private database, and
        prints their web auth token alone on the last line. Clients send it as the ckWebAuthToken query parameter.
        Only its SHA-256 is stored: save it now, it cannot be shown again.

        --email gives the user an email address; --discoverable lets other users find them by it (or by their
        userRecordName) through users/discover and users/lookup/*. Users who are not discoverable are never found.

        The store must not be in use: stop `cloudlet serve` first.
        """

    static func run(_ args: [String]) async throws {
        guard let sub = args.first else { throw UsageError(message: "user needs a subcommand; see `cloudlet user --help`") }
        switch sub {
        case "--help", "-h", "help": say(help)
        case "add":
            let o = try CommandLineOptions(
                Array(args.dropFirst()), valued: ["--data", "--email"], flags: ["--discoverable"], positional: true, help: addHelp)
            guard o.positional.count == 1 else {
                throw UsageError(message: o.positional.isEmpty ? "user add needs a NAME" : "user add takes one NAME")
            }
            let dir = o["--data"] ?? StoreAccess.defaultDirectory
            let (user, token) = try await StoreAccess.with(dir) { store in
                try await Credentials(store: store).createUser(
                    name: o.positional[0], email: o["--email"], discoverable: o.has("--discoverable"))
            }
            say("created user '\(user.name)' (userRecordName \(user.userRecordName)) in \(dir); web auth token "
                + "(only its SHA-256 is stored; save it now):")
            say(token)
        default: throw UsageError(message: "unknown user subcommand '\(sub)'; see `cloudlet user --help`")
        }
    }
}
