import Cloudlet
import CloudletClient
import CloudletCommandLine
@_exported import CloudletCore
@_exported import CloudletModel
import Foundation

/// What every example shares: where its data is — an embedded store (`--data DIR`) or a `cloudlet serve`
/// (`--server URL` with tokens) — and the databases it gets there. The examples' code is written against
/// ``CloudletDatabase`` only, so it runs the same way in both places.
public final class ExampleSession: Sendable {
    /// Options every example takes.
    public static let valued: Set<String> = [
        "--data", "--user", "--server", "--api-token", "--web-auth-token", "--ca-file", "--container",
    ]

    /// Their help text, for each example's usage.
    public static func help(container: String) -> String {
        """
        WHERE THE DATA IS (one of):
          --data DIR              an embedded store in DIR (created if missing), as user --user NAME (default: me)
          --server URL            a cloudlet serve, with --api-token TOKEN and --web-auth-token TOKEN (a user's);
                                  --ca-file FILE to trust a private certificate authority for https
          --container ID          the container (default: \(container))
        """
    }

    private let store: CloudletStore?
    private let container: Container?
    private let remote: RemoteContainer?
    private let user: String

    private init(store: CloudletStore?, container: Container?, remote: RemoteContainer?, user: String) {
        self.store = store
        self.container = container
        self.remote = remote
        self.user = user
    }

    /// Opens the embedded store or names the server the options give. - Throws: ``UsageError`` when neither or
    /// both are given, or a server's tokens are missing.
    public static func open(_ o: CommandLineOptions, defaultContainer: String) async throws -> ExampleSession {
        let id = o["--container"] ?? defaultContainer
        switch (o["--data"], o["--server"]) {
        case (let dir?, nil):
            let store = try await CloudletStore.open(at: dir)
            return ExampleSession(store: store, container: try store.container(id), remote: nil, user: o["--user"] ?? "me")
        case (nil, let url?):
            let client = CloudletClient(
                url: url, apiToken: try o.required("--api-token", "TOKEN"), webAuthToken: try o.required("--web-auth-token", "TOKEN"),
                configuration: .init(caFile: o["--ca-file"]))
            return ExampleSession(store: nil, container: nil, remote: client.container(id), user: "")
        case (nil, nil): throw UsageError(message: "give --data DIR (embedded) or --server URL (remote)")
        case (_?, _?): throw UsageError(message: "give --data or --server, not both")
        }
    }

    /// The database of that scope, for the session's user.
    public func database(_ scope: DatabaseScope) throws -> any CloudletDatabase {
        if let container { return try container.database(scope, user: user) }
        return remote!.database(scope)
    }

    public func close() async {
        try? await store?.close()
    }

    /// Opens a session, runs `body` in it and closes it (also when `body` throws); returns `body`'s exit status.
    public static func with(
        _ o: CommandLineOptions, defaultContainer: String, _ body: (ExampleSession) async throws -> Int32
    ) async throws -> Int32 {
        let session = try await open(o, defaultContainer: defaultContainer)
        do {
            let status = try await body(session)
            await session.close()
            return status
        } catch {
            await session.close()
            throw error
        }
    }
}

/// An example's `main`: parses the options every example takes plus `valued` and `flags`, takes the first
/// positional argument as the command, opens the session, runs `command` (command, its arguments, the options,
/// the session) and exits with the status it returns. A usage error prints the usage and exits 64; any other error
/// prints `error: …` and exits 1 (the engine's error code first, so a script can tell a conflict from a missing
/// record).
public func runExample(
    usage: String, container: String, valued: Set<String> = [], flags: Set<String> = [],
    _ command: @escaping @Sendable (String, [String], CommandLineOptions, ExampleSession) async throws -> Int32
) async -> Never {
    do {
        let o = try CommandLineOptions(
            Array(CommandLine.arguments.dropFirst()), valued: ExampleSession.valued.union(valued), flags: flags,
            positional: true, help: usage)
        guard let name = o.positional.first else { throw UsageError(message: "no command given") }
        exit(
            try await ExampleSession.with(o, defaultContainer: container) { session in
                try await command(name, Array(o.positional.dropFirst()), o, session)
            })
    } catch let e as UsageError {
        FileHandle.standardError.write(Data("error: \(e.message)\n\n\(usage)\n".utf8))
        exit(64)
    } catch let e as CloudletError {
        FileHandle.standardError.write(Data("error: \(e.code.serverErrorName): \(e.message)\n".utf8))
        exit(1)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
}

extension CloudletError.Code {
    /// The code's name, as the examples print it.
    var serverErrorName: String { description }
}

/// A record's field as text, for listings.
public func text(_ v: FieldValue?) -> String {
    switch v {
    case .string(let s)?: s
    case .int64(let i)?: String(i)
    case .double(let d)?: String(d)
    case .timestamp(let t)?: String(t)
    case .location(let l)?: "\(l.latitude),\(l.longitude)"
    case .reference(let r)?: r.recordName
    case .asset(let a)?: "asset \(a.size) bytes"
    case .list(_, let items)?: items.map { text($0) }.joined(separator: ", ")
    case .bytes(let b)?: "\(b.count) bytes"
    case nil: ""
    }
}
