import Cloudlet
import CloudletCommandLine
import CloudletCore
import CloudletServer
import Foundation

/// `cloudlet` — subcommands; exit codes per house style: 0 ok, 64 usage, 65 bad data, 74 I/O, 1 other.
enum CLI {
    static let usage = """
        cloudlet — a CloudKit-style record database

        USAGE: cloudlet <command> [options]

        COMMANDS:
          serve         Serve a store over HTTP(S) with the CloudKit Web Services API.
          token add     Create an API token (ckAPIToken) for a container, or an admin credential (--admin).
          user add      Create a user and their web auth token (ckWebAuthToken).
          role          List custom security roles; add or remove their members.
          key           Add, list or revoke server-to-server keys (ECDSA P-256).
          demo          Open (or create) a store and walk through the embedded API: zones, records,
                        conflicts, atomic batches, cascades. Prints what it does.
          schema        Export, import, deploy or reset a container's schema (CloudKit Schema Language).
          query         Query records of a type with a predicate and sort, or explain the plan.
          cluster       A cluster node's view of leaders, epochs and replicas (cluster status).

        Run `cloudlet <command> --help` for a command's options.
        """

    static func main(_ args: [String]) async {
        guard let command = args.first else {
            print(usage)
            exit(64)
        }
        let rest = Array(args.dropFirst())
        switch command {
        case "--help", "-h", "help": print(usage)
        case "serve": await run { try await Serve.run(rest) }
        case "token": await run { try await TokenCommand.run(rest) }
        case "user": await run { try await UserCommand.run(rest) }
        case "role": await run { try await RoleCommand.run(rest) }
        case "key": await run { try await KeyCommand.run(rest) }
        case "demo": await run { try await Demo.run(rest) }
        case "schema": await run { try await SchemaCommand.run(rest) }
        case "query": await run { try await QueryCommand.run(rest) }
        case "cluster": await run { try await ClusterCommand.run(rest) }
        default: fail("unknown command '\(command)'; see `cloudlet --help`", code: 64)
        }
    }

    static func run(_ body: () async throws -> Void) async {
        do { try await body() } catch let e as UsageError {
            fail(e.message, code: 64)
        } catch let e as CloudletError {
            fail(e.description, code: e.code == .io ? 74 : e.code == .corruption ? 65 : e.code == .invalidArguments || e.code == .badContainer ? 65 : 1)
        } catch let e as ServerSetupError {
            fail(e.message, code: 1)
        } catch {
            fail("\(error)", code: 1)
        }
    }

    static func fail(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data("error: \(message)\n".utf8))
        exit(code)
    }
}
