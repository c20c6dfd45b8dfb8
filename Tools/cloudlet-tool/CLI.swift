import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import CloudletWire
import Foundation

/// `cloudlet-tool`: subcommands, `--help` on every level (stdout, exit 0), errors as `error: …` on stderr with
/// exit 64 (usage), 65 (bad data: corruption, findings, a bad import line), 74 (I/O), 1 (anything else, a locked
/// store included).
enum ToolCLI {
    static let usage = """
        cloudlet-tool — inspect, verify and maintain a Cloudlet data directory offline

        USAGE: cloudlet-tool <command> --data DIR [options]

        READ-ONLY COMMANDS (take the store's lock shared: refused while a process has the store open for writing)
          info      Format, partitions, segments, LSN range, epochs, each partition's index (runs, bytes, flushed
                    LSN), containers, databases and zones with record counts.
          verify    Check every frame, payload, LSN, segment, index run and key directory entry, and that every
                    asset a record references is there; --deep also rebuilds the state from the log alone and
                    compares, and hashes every referenced asset. Exit 0 only when all is well.
          dump      Current records (default), every mutation of the log (--log) or frames (--frames), filtered.
          changes   Replay a zone's change feed from a change token.
          stats     Live and dead bytes per segment and zone, compression, tombstones, key directory sizes, and what
                    compaction would reclaim.
          hash      A content hash per zone, database, partition and store: equal for equal content, however the
                    log is laid out.
          export    Records (and zones and schema) as JSON lines.
          runs      verify, dump or stats of an LSM directory or one sorted run file (takes a PATH, not --data).

        COMMANDS THAT WRITE (take the store's lock exclusively: the store must be stopped)
          compact   Rewrite the log keeping only what is live (--dry-run: only say what it would do).
          repair    Cut a torn tail, set leftovers aside, rebuild the derived state; drop corrupt ranges you name.
          import    Load JSON lines written by export.
          gc        Delete asset files no live record references (older than the grace window).

        OPTIONS FOR EVERY COMMAND
          --data DIR      The store directory (required).
          --json          Output as JSON (one document, or JSON lines for dump, changes and export).
          --no-progress   No progress bar (one is drawn on stderr only when it is a terminal).
          -h, --help      Help for the tool or a command.

        EXIT CODES
          0 all is well · 64 usage error · 65 bad data (corruption, verify findings, a bad import line) ·
          74 I/O error · 1 anything else (e.g. the store is in use)

        Run `cloudlet-tool <command> --help` for a command's options.
        """

    static let commands: [String: (Command.Type)] = [
        "info": InfoCommand.self, "verify": VerifyCommand.self, "dump": DumpCommand.self,
        "changes": ChangesCommand.self, "stats": StatsCommand.self, "hash": HashCommand.self,
        "export": ExportCommand.self, "import": ImportCommand.self, "compact": CompactCommand.self,
        "repair": RepairCommand.self, "generate": GenerateCommand.self, "runs": RunsCommand.self, "gc": GCCommand.self,
    ]

    static func main(_ args: [String]) async {
        guard let name = args.first else {
            print(usage)
            exit(64)
        }
        if name == "--help" || name == "-h" || name == "help" {
            print(usage)
            exit(0)
        }
        guard let command = commands[name] else { fail("unknown command '\(name)'; see `cloudlet-tool --help`", code: 64) }
        let code: Int32
        do {
            code = try await command.run(Array(args.dropFirst()))
        } catch let e as UsageError {
            fail("\(e.message); see `cloudlet-tool \(name) --help`", code: 64)
        } catch let e as CloudletError {
            fail(e.description, code: exitCode(e))
        } catch let e as JSONParser.Error {
            fail("\(e)", code: 65)
        } catch {
            fail("\(error)", code: 1)
        }
        Out.flush()
        Progress.clear()
        exit(code)
    }

    static func exitCode(_ e: CloudletError) -> Int32 {
        switch e.code {
        case .io, .unknownItem: 74
        case .corruption, .invalidArguments, .limitExceeded, .notSupported, .zoneNotFound: 65
        default: 1
        }
    }

    static func fail(_ message: String, code: Int32) -> Never {
        Out.flush()
        warn("error: \(message)")
        exit(code)
    }
}

/// A subcommand: parses its arguments and returns the exit code.
protocol Command: Sendable {
    static func run(_ args: [String]) async throws -> Int32
}

/// Options every command takes.
struct Common {
    static let valued: Set<String> = ["--data"]
    static let flags: Set<String> = ["--json", "--no-progress"]
    static let help = """
          --data DIR      The store directory (required).
          --json          JSON output.
          --no-progress   No progress bar on a terminal.
        """

    let data: String
    let json: Bool

    init(_ o: CommandLineOptions) throws {
        data = try o.required("--data", "DIR")
        json = o.has("--json")
        if o.has("--no-progress") { Progress.enabled = false }
    }

    /// The store's lock taken shared (read-only commands) and an inspector.
    func inspect() throws -> (StoreLock, StoreInspector) {
        guard FileManager.default.fileExists(atPath: data + "/" + StoreMetadata.fileName) else {
            throw CloudletError(.unknownItem, "no Cloudlet store at \(data) (no \(StoreMetadata.fileName) file)")
        }
        let lock = try StoreLock(sharedOn: data)
        return (lock, try StoreInspector(path: data))
    }

    /// The store's lock taken exclusively (commands that write; the store must not be open elsewhere).
    func exclusive() throws -> (StoreLock, StoreInspector) {
        guard FileManager.default.fileExists(atPath: data + "/" + StoreMetadata.fileName) else {
            throw CloudletError(.unknownItem, "no Cloudlet store at \(data) (no \(StoreMetadata.fileName) file)")
        }
        let lock = try StoreLock(directory: data)
        return (lock, try StoreInspector(path: data))
    }
}

/// The database and zone filter options of dump, hash and export.
struct FilterOptions {
    static let valued: Set<String> = ["--container", "--env", "--scope", "--owner", "--zone", "--type", "--from-lsn", "--to-lsn"]
    static let help = """
          --container ID    Only this container (e.g. iCloud.com.example.app).
          --env ENV         Only this environment: development or production.
          --scope SCOPE     Only this database scope: public, private or shared.
          --owner USER      Only databases of this owner (private and shared).
          --zone NAME       Only zones of this name (_defaultZone for the default zone).
          --type TYPE       Only records of this type.
          --from-lsn N      Only changes at or after LSN N.
          --to-lsn N        Only changes at or before LSN N.
        """

    static func parse(_ o: CommandLineOptions) throws -> InspectionFilter {
        var f = InspectionFilter()
        f.container = o["--container"]
        if let e = o["--env"] {
            guard let env = Environment(rawValue: e) else { throw UsageError(message: "--env must be development or production") }
            f.environment = env
        }
        if let s = o["--scope"] {
            guard let scope = DatabaseScope(rawValue: s) else { throw UsageError(message: "--scope must be public, private or shared") }
            f.scope = scope
        }
        f.owner = o["--owner"]
        f.zone = o["--zone"]
        f.recordType = o["--type"]
        let from = try o.uint64("--from-lsn") ?? 0
        let to = try o.uint64("--to-lsn") ?? .max
        guard from <= to else { throw UsageError(message: "--from-lsn is after --to-lsn") }
        if from > 0 || to < .max { f.lsns = from...to }
        return f
    }
}
