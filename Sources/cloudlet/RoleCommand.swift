import Cloudlet
import CloudletCommandLine
import CloudletServer
import Foundation

/// `cloudlet role`: members of the public database's custom security roles (created by `CREATE ROLE` in a schema).
enum RoleCommand {
    static let help = """
        USAGE: cloudlet role <subcommand> --container ID [options]

        SUBCOMMANDS:
          list            The container's custom roles, where they are declared, and their members.
          add-member      Make a user a member of a role: --role ROLE --user NAME.
          remove-member   Remove a user from a role: --role ROLE --user NAME.

        Options: --data DIR (default \(StoreAccess.defaultDirectory)). NAME is a user created by `cloudlet user add`.
        Roles are created in the schema (CREATE ROLE Editors; GRANT READ, WRITE TO Editors in a RECORD TYPE) and
        apply to the public database (docs/access-control.md). The server's admin API does the same at
        /cloudlet/admin/roles/*. The store must not be in use: stop `cloudlet serve` first, or use the admin API.
        """

    static func run(_ args: [String]) async throws {
        guard let sub = args.first else { throw UsageError(message: "role needs a subcommand; see `cloudlet role --help`") }
        if ["--help", "-h", "help"].contains(sub) { return say(help) }
        guard ["list", "add-member", "remove-member"].contains(sub) else {
            throw UsageError(message: "unknown role subcommand '\(sub)'; see `cloudlet role --help`")
        }
        let o = try CommandLineOptions(Array(args.dropFirst()), valued: ["--data", "--container", "--role", "--user"], help: help)
        let id = try o.required("--container", "ID")
        let dir = o["--data"] ?? StoreAccess.defaultDirectory
        if sub == "list" {
            let lines = try await StoreAccess.with(dir) { store in
                let c = try store.container(id)
                let members = c.roleMembers()
                var names = Set(members.keys)
                for env in Environment.allCases { names.formUnion(c.securityPolicy(environment: env).roles) }
                let credentials = Credentials(store: store)
                var out: [String] = []
                for name in names.sorted() {
                    let envs = Environment.allCases.filter { c.securityPolicy(environment: $0).roles.contains(name) }
                    var who: [String] = []
                    for m in members[name] ?? [] { who.append(try await credentials.name(ofUserRecordName: m) ?? m) }
                    out.append("\(name) (\(envs.map(\.rawValue).joined(separator: ", "))): \(who.isEmpty ? "no members" : who.joined(separator: ", "))")
                }
                return out
            }
            say(lines.isEmpty ? "no custom roles in \(id)" : lines.joined(separator: "\n"))
            return
        }
        let role = try o.required("--role", "ROLE")
        let userName = try o.required("--user", "NAME")
        try await StoreAccess.with(dir) { store in
            let c = try store.container(id)
            guard let user = try await Credentials(store: store).user(named: userName) else {
                throw CloudletError(.unknownItem, "there is no user named '\(userName)' in \(dir)")
            }
            if sub == "add-member" {
                try await c.addRoleMember(user.userRecordName, role: role)
            } else {
                try await c.removeRoleMember(user.userRecordName, role: role)
            }
        }
        say(sub == "add-member" ? "'\(userName)' is a member of role \(role) in \(id)" : "'\(userName)' is no longer a member of role \(role) in \(id)")
    }
}
