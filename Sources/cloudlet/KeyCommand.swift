import Cloudlet
import CloudletCommandLine
import CloudletServer
import Foundation

/// `cloudlet key`: server-to-server keys (ECDSA P-256), with which server-side CloudKit clients sign requests.
enum KeyCommand {
    static let help = """
        USAGE: cloudlet key <subcommand> [options]

        SUBCOMMANDS:
          add      Add a public key for a container: --container ID --public-key FILE. Prints its key ID.
          list     List keys: [--container ID] [--json].
          revoke   Revoke a key: KEYID. Requests signed with it fail from then on.

        Options: --data DIR (default \(StoreAccess.defaultDirectory)).

        Make a key pair with OpenSSL and add its public half:

            openssl ecparam -genkey -name prime256v1 -noout -out eckey.pem
            openssl ec -in eckey.pem -pubout -out eckey.pub.pem
            cloudlet key add --container iCloud.com.example.app --public-key eckey.pub.pem

        Clients send the key ID as X-Apple-CloudKit-Request-KeyID and sign each request as CloudKit documents
        (X-Apple-CloudKit-Request-ISO8601Date, X-Apple-CloudKit-Request-SignatureV1). A key acts on its container's
        public database as the developer; it has no private database. The store must not be in use.
        """

    static func run(_ args: [String]) async throws {
        guard let sub = args.first else { throw UsageError(message: "key needs a subcommand; see `cloudlet key --help`") }
        let rest = Array(args.dropFirst())
        switch sub {
        case "--help", "-h", "help": say(help)
        case "add":
            let o = try CommandLineOptions(rest, valued: ["--data", "--container", "--public-key"], help: help)
            let container = try o.required("--container", "ID")
            let file = try o.required("--public-key", "FILE")
            let pem: String
            do { pem = try String(contentsOfFile: file, encoding: .utf8) } catch {
                throw CloudletError(.io, "cannot read the public key '\(file)': \(error.localizedDescription)")
            }
            let dir = o["--data"] ?? StoreAccess.defaultDirectory
            let id = try await StoreAccess.with(dir) { store in
                try await Credentials(store: store).addServerKey(container: container, pem: pem)
            }
            say("added a server-to-server key for \(container) in \(dir); its key ID (X-Apple-CloudKit-Request-KeyID):")
            say(id)
        case "list":
            let o = try CommandLineOptions(rest, valued: ["--data", "--container"], flags: ["--json"], help: help)
            let dir = o["--data"] ?? StoreAccess.defaultDirectory
            let keys = try await StoreAccess.with(dir) { store in try await Credentials(store: store).serverKeys(container: o["--container"]) }
            if o.has("--json") {
                let rows = keys.map { k in
                    #"{"keyID":"\#(k.keyID)","container":"\#(k.container)","revoked":\#(k.revoked),"created":\#(k.created ?? 0)}"#
                }
                say("[" + rows.joined(separator: ",") + "]")
            } else if keys.isEmpty {
                say("no server-to-server keys")
            } else {
                for k in keys { say("\(k.keyID)  \(k.container)\(k.revoked ? "  revoked" : "")") }
            }
        case "revoke":
            let o = try CommandLineOptions(rest, valued: ["--data"], positional: true, help: help)
            guard o.positional.count == 1 else { throw UsageError(message: "key revoke takes one KEYID") }
            let dir = o["--data"] ?? StoreAccess.defaultDirectory
            try await StoreAccess.with(dir) { store in try await Credentials(store: store).revokeServerKey(o.positional[0]) }
            say("revoked key \(o.positional[0])")
        default: throw UsageError(message: "unknown key subcommand '\(sub)'; see `cloudlet key --help`")
        }
    }
}
