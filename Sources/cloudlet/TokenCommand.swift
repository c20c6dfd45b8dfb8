import Cloudlet
import CloudletCommandLine
import CloudletServer
import Foundation

/// `cloudlet token add`: API tokens (CloudKit's `ckAPIToken`), each granting access to one container.
enum TokenCommand {
    static let help = """
        USAGE: cloudlet token <subcommand> [options]

        SUBCOMMANDS:
          add      Create an API token for a container, or an admin credential (--admin).
          list     List API tokens and admin credentials by ID (the start of their SHA-256; never the secret):
                   [--json] [--data DIR].
          revoke   Revoke one: ID (at least 8 hex digits of it) [--data DIR].

        Run `cloudlet token add --help` for its options.
        """

    static let addHelp = """
        USAGE: cloudlet token add --container ID [--data DIR]
               cloudlet token add --admin [--data DIR]

        Creates an API token granting access to container ID (e.g. iCloud.com.example.app) in the store at DIR
        (default \(StoreAccess.defaultDirectory)) and prints it alone on the last line. Clients send it as the
        ckAPIToken query parameter. Only its SHA-256 is stored: save it now, it cannot be shown again.

        With --admin, creates an admin credential instead: the one thing the /cloudlet/admin/* routes (schema
        import, export, deploy, reset, query explain, roles) and /cloudlet/metrics accept, for every container of
        the server. Send it as `Authorization: Bearer TOKEN`.

        The store must not be in use: stop `cloudlet serve` first.
        """

    static func run(_ args: [String]) async throws {
        guard let sub = args.first else { throw UsageError(message: "token needs a subcommand; see `cloudlet token --help`") }
        switch sub {
        case "--help", "-h", "help": say(help)
        case "add":
            let o = try CommandLineOptions(
                Array(args.dropFirst()), valued: ["--data", "--container"], flags: ["--admin"], positional: true, help: addHelp)
            guard o.positional.isEmpty else { throw UsageError(message: "unexpected argument '\(o.positional[0])'") }
            if o.has("--admin") {
                guard o["--container"] == nil else { throw UsageError(message: "--admin takes no --container: it is for every container") }
                let dir = o["--data"] ?? StoreAccess.defaultDirectory
                let secret = try await StoreAccess.with(dir) { store in try await Credentials(store: store).createAdminToken() }
                say("created an admin credential in \(dir) (only its SHA-256 is stored; save it now):")
                say(secret)
                return
            }
            let container = try o.required("--container", "ID")
            let dir = o["--data"] ?? StoreAccess.defaultDirectory
            let secret = try await StoreAccess.with(dir) { store in
                try await Credentials(store: store).createAPIToken(container: container)
            }
            say("created an API token for \(container) in \(dir) (only its SHA-256 is stored; save it now):")
            say(secret)
        case "list":
            let o = try CommandLineOptions(Array(args.dropFirst()), valued: ["--data"], flags: ["--json"], help: help)
            let dir = o["--data"] ?? StoreAccess.defaultDirectory
            let tokens = try await StoreAccess.with(dir) { store in try await Credentials(store: store).tokens() }
            if o.has("--json") {
                say("[" + tokens.map { t in
                    #"{"kind":"\#(t.kind.rawValue)","id":"\#(t.id)","container":\#(t.container.map { "\"\($0)\"" } ?? "null")}"#
                }.joined(separator: ",") + "]")
            } else if tokens.isEmpty {
                say("no tokens")
            } else {
                for t in tokens { say("\(t.id)  \(t.kind == .admin ? "admin" : "api    \(t.container ?? "")")") }
            }
        case "revoke":
            let o = try CommandLineOptions(Array(args.dropFirst()), valued: ["--data"], positional: true, help: help)
            guard o.positional.count == 1 else { throw UsageError(message: "token revoke takes one ID (see `cloudlet token list`)") }
            let dir = o["--data"] ?? StoreAccess.defaultDirectory
            try await StoreAccess.with(dir) { store in try await Credentials(store: store).revokeToken(o.positional[0]) }
            say("revoked token \(o.positional[0])")
        default: throw UsageError(message: "unknown token subcommand '\(sub)'; see `cloudlet token --help`")
        }
    }
}
