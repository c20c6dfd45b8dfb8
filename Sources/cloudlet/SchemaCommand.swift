import Cloudlet
import CloudletCommandLine
import CloudletCore
import Foundation

/// `cloudlet schema export|import|deploy|reset`: a container's schema in the CloudKit Schema Language.
enum SchemaCommand {
    static let help = """
        USAGE: cloudlet schema <subcommand> --data DIR --container ID [options]

        SUBCOMMANDS:
          export   Write the schema of an environment (default development) in the CloudKit Schema Language to
                   standard output, or to --file F.
          import   Add the record types, fields and index options of --file F (or standard input) to the
                   development schema: additive, all or nothing; errors name the line and column.
          deploy   Promote the development schema to production (additive: refuses to drop anything production
                   has, index options included). New production indexes are built before the command returns.
          reset    Reset the development schema to production's (records are kept).

        Run `cloudlet schema <subcommand> --help` for its options.
        """

    static func subcommandHelp(_ name: String) -> String {
        switch name {
        case "export":
            return """
                USAGE: cloudlet schema export --data DIR --container ID [--environment development|production] [--file F]

                Writes the schema (record types, field types, QUERYABLE / SORTABLE / SEARCHABLE options, system
                fields) to F, or to standard output.
                """
        case "import":
            return """
                USAGE: cloudlet schema import --data DIR --container ID [--file F]

                Reads a schema text from F (or standard input) and adds what it defines to the development schema.
                Nothing is removed; a field whose type contradicts the schema, or a syntax error, fails the whole
                import (exit 65) with its line and column. Indexes on existing records are built before exiting.
                """
        case "deploy":
            return """
                USAGE: cloudlet schema deploy --data DIR --container ID

                Adds every record type, field and index option of development that production lacks, and builds
                the new indexes over production's records. Refuses (exit 65), naming it, a field whose type differs
                or anything production has that development lacks.
                """
        default:
            return """
                USAGE: cloudlet schema reset --data DIR --container ID

                Makes the development schema equal to production's: types, fields and index options only
                development has are forgotten, and their indexes dropped. Records are kept.
                """
        }
    }

    static func run(_ args: [String]) async throws {
        guard let sub = args.first, !sub.hasPrefix("-") else {
            if args.contains("--help") || args.contains("-h") {
                print(help)
                return
            }
            throw UsageError(message: "cloudlet schema needs a subcommand (export, import, deploy, reset); see --help")
        }
        guard ["export", "import", "deploy", "reset"].contains(sub) else {
            throw UsageError(message: "unknown schema subcommand '\(sub)'; see `cloudlet schema --help`")
        }
        let valued: Set<String> =
            switch sub {
            case "export": ["--data", "--container", "--environment", "--file"]
            case "import": ["--data", "--container", "--file"]
            default: ["--data", "--container"]
            }
        let o = try CommandLineOptions(Array(args.dropFirst()), valued: valued, positional: true, help: subcommandHelp(sub))
        guard o.positional.isEmpty else { throw UsageError(message: "unexpected argument '\(o.positional[0])'") }
        let store = try await StoreOptions.open(o)
        defer { try? store.closeNow() }
        let container = try StoreOptions.container(o, store)
        do {
            switch sub {
            case "export":
                let env = try StoreOptions.environment(o)
                let text = container.exportSchema(environment: env)
                if let file = o["--file"] {
                    do { try text.write(toFile: file, atomically: true, encoding: .utf8) } catch {
                        throw CloudletError.io("cannot write \(file): \(error.localizedDescription)")
                    }
                } else {
                    print(text, terminator: "")
                }
            case "import":
                let text: String
                if let file = o["--file"] {
                    guard let data = FileManager.default.contents(atPath: file), let s = String(data: data, encoding: .utf8) else {
                        throw CloudletError.io("cannot read \(file)")
                    }
                    text = s
                } else {
                    text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
                }
                let result = try await container.importSchema(text)
                await store.waitForIndexBuilds()
                if result.isEmpty { print("nothing to add: development already has everything in the schema text") }
                for t in result.recordTypes { print("added record type \(t)") }
                for f in result.fields { print("added field \(f)") }
                for i in result.indexes { print("added index \(i)") }
                for r in result.roles { print("added role \(r)") }
                for g in result.grants { print("set grants \(g)") }
                for i in result.ignored { print("ignored \(i)") }
            case "deploy":
                let n = try await container.deploySchema()
                await store.waitForIndexBuilds()
                print(n == 0 ? "production already has the development schema" : "deployed \(n) change\(n == 1 ? "" : "s") to production")
            default:
                try await container.resetDevelopmentSchema()
                print("development schema reset to production's")
            }
        } catch let e as CloudletError where e.code == .invalidArguments {
            try? store.closeNow()
            CLI.fail(e.message, code: 65)
        }
    }
}

/// The options every store command shares: `--data`, `--container`, `--environment`.
enum StoreOptions {
    static func open(_ o: CommandLineOptions) async throws -> CloudletStore {
        let dir = try o.required("--data", "DIR")
        _ = try o.required("--container", "ID")
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CloudletError.io("no store at \(dir)")
        }
        let store = try await CloudletStore.open(at: dir)
        await store.waitForIndexBuilds()
        return store
    }

    static func container(_ o: CommandLineOptions, _ store: CloudletStore) throws -> Container {
        try store.container(o["--container"]!)
    }

    static func environment(_ o: CommandLineOptions) throws -> CloudletCore.Environment {
        guard let e = o["--environment"] else { return .development }
        guard let env = CloudletCore.Environment(rawValue: e) else {
            throw UsageError(message: "--environment must be development or production, not '\(e)'")
        }
        return env
    }
}
