import Cloudlet
import CloudletCommandLine
import CloudletConcurrency
import CloudletServer
import Foundation

/// `cloudlet serve`: the CloudKit Web Services API over a data directory, until SIGTERM or SIGINT.
enum Serve {
    static let defaultContainer = "iCloud.com.example.app"
    static let firstUserName = "user"

    static let help = """
        USAGE: cloudlet serve [--data DIR] [--host H] [--port P] [--tls-cert FILE --tls-key FILE] [--public-url URL]
                              [--durability fsync|os] [--container ID] [--threads N] [--response-budget BYTES]
                              [--max-asset-size BYTES] [--asset-url-lifetime SECONDS] [--asset-gc-interval SECONDS]
                              [--courier-token-lifetime SECONDS]
                              [--rate-limit REQUESTS_PER_SECOND [--burst N]] [--user-quota BYTES]
                              [--max-connections-per-peer N] [--header-timeout MS] [--body-timeout MS]
                              [--keep-alive-timeout MS] [--max-subscriptions-per-user N] [--segment-size BYTES]
                              [--cluster etcd://HOST:PORT --node NAME [--advertise URL] [--replicas N]
                               [--ack quorum|leader] [--lease-ttl SECONDS] [--cluster-name NAME]]

        Serves the store at DIR over HTTP (or HTTPS) with the CloudKit Web Services API under
        /database/1/{container}/{environment}/{database}/ and Cloudlet's own /cloudlet/health and /cloudlet/metrics.

        OPTIONS:
          --data DIR          store directory, created if missing (default \(StoreAccess.defaultDirectory))
          --host H            IPv4 address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)
          --port P            TCP port (default 8080; 0 picks a free port, printed as "listening on URL")
          --tls-cert FILE     PEM certificate (and chain): serve HTTPS (needs --tls-key)
          --tls-key FILE      PEM private key
          --public-url URL    the origin of every URL the server hands out (sign-in redirectURL, webcourierURL,
                              websocketURL, asset upload/download and share URLs): http(s)://HOST[:PORT][/PREFIX],
                              no query or fragment; set it when clients reach the server through another name
                              or a reverse proxy. Default: the address listened on (127.0.0.1 for 0.0.0.0), or
                              --advertise in a cluster. The request's Host header is never used
          --durability D      fsync (default): a write is acknowledged once fdatasync'ed;
                              os: once written to the OS (survives a process crash, not a power cut)
          --container ID      on a fresh store, the container of the first API token (default \(defaultContainer))
          --threads N         worker threads, i.e. requests handled at once (default 64); connections are not
                              limited by it: idle keep-alives, long polls and websockets hold no thread
          --max-connections-per-peer N
                              connections open at once from one IP address (default 1024; 0: no cap); one more
                              is answered 503. Behind a reverse proxy, raise it or use 0
          --header-timeout MS a request's line and headers (and an HTTPS handshake) must arrive within MS of
                              their first byte, else 408 (default 10000)
          --body-timeout MS   the longest pause inside a request body, else 408 (default 30000)
          --keep-alive-timeout MS
                              an idle keep-alive connection, or a client that stops reading its answer, is closed
                              after MS (default 5000)
          --response-budget BYTES
                              record bytes one response may carry (default 4194304 = 4 MiB; 65536 to 1073741824):
                              query and change pages end early with moreComing / a continuation marker, lookups
                              answer the records past it with LIMIT_EXCEEDED; a page always carries one record
          --max-asset-size BYTES
                              largest asset file an upload URL accepts (default 250000000); larger: 413, not kept
          --asset-url-lifetime SECONDS
                              how long asset upload URLs, receipts and download URLs stay valid (default 900)
          --asset-gc-interval SECONDS
                              seconds between collections of asset files no record references (default 3600; 0: off)
          --courier-token-lifetime SECONDS
                              a notification courier token (tokens/create, tokens/register) expires SECONDS after its
                              last use: creating it, a long-poll or a websocket opened with it (default 86400 = 24 h;
                              60 to 31536000). A user holds at most 64 per container and environment (the least
                              recently used goes). Open websockets and long-polls are not cut when it expires
          --rate-limit R      per-caller request rate limit (a user, a server-to-server key, or an API token used
                              alone, each on its own): R requests a second sustained; over it, 429 THROTTLED with
                              retryAfter. Default: no limit
          --burst N           requests a caller may make at once under --rate-limit (default: 10 × R, at least 1)
          --user-quota BYTES  storage quota of each user's private database (records' stored sizes); a save that
                              would pass it fails with QUOTA_EXCEEDED. Default: none
          --max-subscriptions-per-user N
                              subscriptions one user may have in one database (default 1000; 1 to 1000000): a
                              subscriptions/modify that would pass it fails with QUOTA_EXCEEDED and saves nothing
          --segment-size BYTES
                              log segments roll at BYTES (default 67108864 = 64 MiB; 4096 to 1073741824);
                              background compaction starts once the sealed segments hold this many dead bytes
                              and at least half of them are dead. Smaller: space comes back sooner, more files

        On a fresh store it creates an API token for the container, a user named '\(firstUserName)' and an admin
        credential (for the console at /cloudlet/console/), and prints them with a curl example (they are stored
        hashed and shown only once). Manage more with `cloudlet token add` and `cloudlet user add` while the server is
        stopped.

        Logs one line per request to stderr (time, client, method, path, status, ms; never the query string).
        SIGTERM or SIGINT stops it cleanly: no new connections, requests in flight finish, the store is closed
        (everything acknowledged is on disk) and the lock released.
        """

    static func run(_ args: [String]) async throws {
        let o = try CommandLineOptions(
            args,
            valued: Set([
                "--data", "--host", "--port", "--tls-cert", "--tls-key", "--public-url", "--durability", "--container", "--threads",
                "--response-budget", "--max-asset-size", "--asset-url-lifetime", "--asset-gc-interval", "--courier-token-lifetime", "--rate-limit", "--burst",
                "--user-quota", "--max-connections-per-peer", "--header-timeout", "--body-timeout", "--keep-alive-timeout",
                "--max-subscriptions-per-user", "--segment-size",
            ] + ServeCluster.options), positional: true, help: help + "\n\n" + ServeCluster.help)
        guard o.positional.isEmpty else { throw UsageError(message: "unexpected argument '\(o.positional[0])'") }
        let dir = o["--data"] ?? StoreAccess.defaultDirectory
        var config = ServerConfiguration()
        config.host = o["--host"] ?? config.host
        config.port = try o.integer("--port", in: 0...65535) ?? config.port
        config.threads = try o.integer("--threads", in: 1...1024) ?? config.threads
        config.maxConnectionsPerPeer =
            try o.integer("--max-connections-per-peer", in: 0...1_000_000, "a number of connections") ?? config.maxConnectionsPerPeer
        config.headerTimeoutMilliseconds =
            try o.integer("--header-timeout", in: 100...600_000, "milliseconds") ?? config.headerTimeoutMilliseconds
        config.requestTimeoutMilliseconds =
            try o.integer("--body-timeout", in: 100...600_000, "milliseconds") ?? config.requestTimeoutMilliseconds
        config.keepAliveTimeoutMilliseconds =
            try o.integer("--keep-alive-timeout", in: 100...600_000, "milliseconds") ?? config.keepAliveTimeoutMilliseconds
        config.responseBudget = try o.integer("--response-budget", in: (64 << 10)...(1 << 30), "a number of bytes") ?? config.responseBudget
        config.maxAssetSize = Int64(
            try o.integer("--max-asset-size", in: 1...(1 << 40), "a number of bytes") ?? Int(config.maxAssetSize))
        config.assetURLLifetime = Double(
            try o.integer("--asset-url-lifetime", in: 1...(7 * 24 * 3600), "seconds") ?? Int(config.assetURLLifetime))
        config.assetCollectionInterval = Double(
            try o.integer("--asset-gc-interval", in: 0...(30 * 24 * 3600), "seconds") ?? Int(config.assetCollectionInterval))
        config.courierTokenLifetime = Double(
            try o.integer("--courier-token-lifetime", in: 60...(365 * 24 * 3600), "seconds") ?? Int(config.courierTokenLifetime))
        if let r = o["--rate-limit"] {
            guard let rate = Double(r), rate > 0, rate.isFinite, rate <= 1_000_000 else {
                throw UsageError(message: "--rate-limit needs a number of requests a second above 0, not '\(r)'")
            }
            let burst = try o.integer("--burst", in: 1...1_000_000, "a number of requests") ?? max(1, Int(rate * 10))
            config.rateLimit = ServerConfiguration.RateLimit(requestsPerSecond: rate, burst: burst)
        } else if o["--burst"] != nil {
            throw UsageError(message: "--burst goes with --rate-limit")
        }
        config.userQuota = try o.integer("--user-quota", in: 1...Int.max, "a number of bytes")
        config.publicURL = try publicURL(o["--public-url"], option: "--public-url")
        config.tlsCertificatePath = o["--tls-cert"]
        config.tlsKeyPath = o["--tls-key"]
        guard (config.tlsCertificatePath == nil) == (config.tlsKeyPath == nil) else {
            throw UsageError(message: "--tls-cert and --tls-key go together")
        }
        for path in [config.tlsCertificatePath, config.tlsKeyPath].compactMap({ $0 })
        where !FileManager.default.isReadableFile(atPath: path) {
            throw CloudletError(.io, "cannot read \(path)")
        }
        let durability: Durability
        switch o["--durability"] ?? "fsync" {
        case "fsync": durability = .fsync
        case "os": durability = .os
        case let d: throw UsageError(message: "--durability must be fsync or os, not '\(d)'")
        }
        let container = o["--container"] ?? defaultContainer
        var storeConfig = StoreConfiguration(durability: durability)
        storeConfig.subscriptionsPerUser =
            try o.integer("--max-subscriptions-per-user", in: 1...1_000_000, "a number of subscriptions") ?? storeConfig.subscriptionsPerUser
        if let size = try o.integer("--segment-size", in: 4096...(1 << 30), "a number of bytes") {
            storeConfig.segmentSize = size
            storeConfig.compaction.minDeadBytes = size
        }

        // Take over SIGTERM and SIGINT before anything else, so a signal during start-up also stops cleanly.
        let stop = SignalWaiter([SIGTERM, SIGINT])

        if let cluster = try ServeCluster.configuration(o) {
            // A node hands out URLs to itself: its advertised address, unless a public URL is given.
            if config.publicURL == nil, !cluster.advertise.isEmpty {
                config.publicURL = try publicURL(cluster.advertise, option: "--advertise")
            }
            try await ServeCluster.run(
                dir: dir, server: config, store: storeConfig, container: container, cluster: cluster, stop: stop)
            return
        }
        let store = try await StoreAccess.open(dir, configuration: storeConfig, hint: "One server per data directory")
        let server: Server
        do {
            let credentials = Credentials(store: store)
            let bootstrap = try await credentials.bootstrapIfNeeded(container: container, userName: firstUserName)
            // A fresh store also gets an admin credential, so that the console opens from the first start.
            let admin = bootstrap == nil ? nil : try await credentials.createAdminToken()
            server = try Server(store: store, configuration: config)
            try server.start()
            say("cloudlet: serving store \(dir) (id \(store.metadata.storeID), durability \(o["--durability"] ?? "fsync"))")
            if config.publicURL == nil && config.host == "0.0.0.0" {
                say("cloudlet: URLs in answers (courier, asset, sign-in) name \(server.publicURL); set --public-url for clients on other machines")
            }
            if let bootstrap, let admin { printBootstrap(bootstrap, admin: admin, url: server.url) }
            // Last: a script waiting for this line has everything above it.
            say("listening on \(server.url)")
        } catch {
            try? await store.close()
            throw error
        }

        let signal = await stop.wait()
        ServerConfiguration.standardError("cloudlet: \(signal == SIGINT ? "SIGINT" : "SIGTERM"): stopping")
        // Stopping waits for the requests in flight: off the cooperative pool.
        await ThreadBridge.offload { server.stop() }
        try await store.close()
        ServerConfiguration.standardError("cloudlet: stopped; store closed")
    }

    /// `text` checked as a public URL (``PublicURL``); a usage error naming `option` and what is wrong.
    static func publicURL(_ text: String?, option: String) throws -> PublicURL? {
        guard let text else { return nil }
        do { return try PublicURL(text) } catch let e as ServerSetupError {
            throw UsageError(message: "\(option): \(e.message)")
        }
    }

    static func printBootstrap(_ b: Credentials.Bootstrap, admin: String, url: String) {
        let base = "\(url)/database/1/\(b.container)/development"
        let auth = "ckAPIToken=\(b.apiToken)&ckWebAuthToken=\(b.webAuthToken)"
        let tls = url.hasPrefix("https") ? "--cacert CERT.pem " : ""
        say(
            """

            This is a fresh store: created an API token for \(b.container), user '\(b.user.name)' \
            (userRecordName \(b.user.userRecordName)) and an admin credential.
            They are stored only as SHA-256 hashes; save them now:
              ckAPIToken: \(b.apiToken)
              ckWebAuthToken: \(b.webAuthToken)
              admin credential: \(admin)

            The console: \(url)/cloudlet/console/ (sign in with the admin credential)

            Try it:
              curl -s \(tls)'\(base)/private/records/modify?\(auth)' \\
                -d '{"operations":[{"operationType":"create","record":{"recordName":"hello","recordType":"Note","fields":{"title":{"value":"Hello, Cloudlet"}}}}]}'
              curl -s \(tls)'\(base)/private/records/lookup?\(auth)' -d '{"records":[{"recordName":"hello"}]}'

            """)
    }
}
