// swift-tools-version:6.0
import PackageDescription

// Module layout: DESIGN.md §1. Data flows API → engine → partition → log; nothing below knows what is above.
// The benchmarks (cloudlet-bench, with SQLite and RocksDB as anchors) are a package of their own that depends on this
// one: Benchmarks/Package.swift.
let package = Package(
    name: "Cloudlet",
    products: [
        .library(name: "Cloudlet", targets: ["Cloudlet"]),
        .library(name: "CloudletServer", targets: ["CloudletServer"]),
        // The value types, codec and helpers (SplitMix64) under both; Cloudlet re-exports them. A product of its own
        // for packages that use them directly, such as the benchmarks (Benchmarks/Package.swift).
        .library(name: "CloudletCore", targets: ["CloudletCore"]),
        // The two bridges between blocking threads and Swift concurrency (ThreadBridge), which the engine, the
        // server, the CLI and the benchmarks share.
        .library(name: "CloudletConcurrency", targets: ["CloudletConcurrency"]),
        // The command-line option parser of cloudlet, cloudlet-tool and cloudlet-bench (a product for the last one).
        .library(name: "CloudletCommandLine", targets: ["CloudletCommandLine"]),
        // civetweb's C API: only its websocket client is used, by the tests and the benchmarks (to receive
        // notifications from a server). The server itself is on CEventHTTP.
        .library(name: "CCivetweb", targets: ["CCivetweb"]),
        // The client of `cloudlet serve` (CloudKit Web Services over libcurl), with the same database protocol as the
        // embedded engine.
        .library(name: "CloudletClient", targets: ["CloudletClient"]),
        .library(name: "CloudletSync", targets: ["CloudletSync"]),
        // The layers below the engine, for the fuzz targets (Fuzz/Package.swift), which decode their formats directly.
        .library(name: "CloudletStorage", targets: ["CloudletStorage"]),
        .library(name: "CloudletModel", targets: ["CloudletModel"]),
        .library(name: "CloudletWire", targets: ["CloudletWire"]),
        // Child processes, etcd and free ports: the tests' harness, which cloudlet-bench's cluster rows use too.
        .library(name: "CloudletTestSupport", targets: ["CloudletTestSupport"]),
        .executable(name: "cloudlet", targets: ["cloudlet"]),
        .executable(name: "cloudlet-tool", targets: ["cloudlet-tool"]),
    ],
    targets: [
        // C libraries from Debian packages (see .ci/packages).
        .systemLibrary(name: "CLZ4", pkgConfig: "liblz4", providers: [.apt(["liblz4-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // civetweb ships no pkg-config file; the modulemap links it. Its websocket client only (tests, benchmarks).
        .systemLibrary(name: "CCivetweb", providers: [.apt(["libcivetweb-dev"])]),
        // libcurl, OpenSSL flavour, for the client (a custom CA file, HTTP/2); see Sources/CloudletClient.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // Value types, codec, checksums, errors. No I/O.
        // CRC-32C with the CPU's instructions: a few lines of C, no system library.
        .target(name: "CCRC32C"),
        .target(name: "CloudletCore", dependencies: ["CCRC32C"]),
        // ThreadBridge: wait for async code from a thread that may block, and offload blocking work from async code.
        .target(name: "CloudletConcurrency"),
        // CommandLineOptions and UsageError: options, flags, positional arguments, --help, integers in a range.
        .target(name: "CloudletCommandLine"),
        // The public API's value types (queries, operations, results, change feeds, subscriptions) and the
        // `CloudletDatabase` protocol that embedded and remote databases share. No I/O, no C.
        .target(name: "CloudletModel", dependencies: ["CloudletCore"]),
        // CloudKit Web Services on the wire: one JSON value/parser/writer, every coding (records, fields, filters,
        // zone IDs, subscriptions, tokens, errors) and the one error ↔ serverErrorCode ↔ HTTP status table. Used by
        // the server, the tools and clients.
        .target(name: "CloudletWire", dependencies: ["CloudletCore", "CloudletModel"]),
        // Segments, frames, group commit, recovery, checkpoints.
        .target(name: "CloudletStorage", dependencies: ["CloudletConcurrency", "CloudletCore", "CLZ4"], exclude: ["LogFormat.md", "SortedRunFormat.md"]),
        // Replication as state machines (events in, actions out): election through the coordinator, tailing,
        // quorum acknowledgement, fencing. No I/O; docs/replication.md.
        .target(name: "CloudletReplication", dependencies: ["CloudletCore"]),
        // The embedded engine (library product).
        .target(
            name: "Cloudlet",
            dependencies: ["CloudletConcurrency", "CloudletCore", "CloudletModel", "CloudletStorage", "COpenSSL"]),
        // The client library: RemoteDatabase conforms to CloudletDatabase, requests go through libcurl.
        .target(
            name: "CloudletClient",
            dependencies: ["CloudletConcurrency", "CloudletCore", "CloudletModel", "CloudletWire", "CCurl", "COpenSSL"]),
        // The sync engine: an embedded store kept in sync with a remote database, offline first (CKSyncEngine's shape).
        .target(name: "CloudletSync", dependencies: ["Cloudlet", "CloudletCore", "CloudletModel"]),
        // Offline tooling over a stopped store (StoreInspector: info, verify, dump, stats, hash, repair; import),
        // for cloudlet-tool and the tests. Not a product: its API and the engine internals it uses are `package`.
        .target(name: "CloudletMaintenance", dependencies: ["Cloudlet", "CloudletCore", "CloudletStorage", "COpenSSL"]),

        // The event-driven HTTP/1.1 front end of the server: libuv's loop, http-parser's framing, OpenSSL's TLS
        // through memory BIOs, websockets, a worker pool; docs/front-end.md.
        .target(
            name: "CEventHTTP",
            linkerSettings: [
                .linkedLibrary("uv"), .linkedLibrary("http_parser"), .linkedLibrary("ssl"), .linkedLibrary("crypto"),
                .linkedLibrary("pthread"),
            ]),
        // HTTP(S) API compatible with CloudKit Web Services, auth, metrics, and the console (docs/console.md), whose
        // web files (Console/Web) the ConsoleEmbed plugin compiles into the module.
        .target(
            name: "CloudletServer",
            dependencies: [
                "Cloudlet", "CloudletConcurrency", "CloudletCore", "CloudletWire", "CEventHTTP", "COpenSSL",
            ],
            exclude: ["Console/Web"],
            plugins: ["ConsoleEmbed"]),
        // Writes the console's web files into a Swift source at build time (for the ConsoleEmbed plugin).
        .executableTarget(name: "console-embed"),
        .plugin(name: "ConsoleEmbed", capability: .buildTool(), dependencies: ["console-embed"]),
        // The cluster (issue 14): the etcd client, the replication driver that runs CloudletReplication's state machine
        // over a store's logs, log shipping between nodes, write forwarding. docs/replication.md.
        .target(
            name: "CloudletCluster",
            dependencies: [
                "Cloudlet", "CloudletClient", "CloudletConcurrency", "CloudletCore", "CloudletReplication", "CloudletServer",
                "CloudletStorage", "CloudletWire",
            ]),

        .executableTarget(
            name: "cloudlet",
            dependencies: [
                "Cloudlet", "CloudletCluster", "CloudletCommandLine", "CloudletConcurrency", "CloudletCore", "CloudletWire",
                "CloudletServer", "CloudletReplication",
            ]),
        .executableTarget(
            name: "cloudlet-tool",
            dependencies: [
                "Cloudlet", "CloudletCommandLine", "CloudletCore", "CloudletMaintenance", "CloudletStorage", "CloudletWire",
            ],
            path: "Tools/cloudlet-tool"),
        // The writer the crash-consistency tests SIGKILL (not a product; CloudletTests depends on it so that it is
        // built with the tests).
        .executableTarget(
            name: "cloudlet-crash-writer", dependencies: ["Cloudlet", "CloudletCore", "CloudletStorage", "CloudletTestSupport"]),

        // Test doubles and helpers shared by the test targets (not a product): temp directories, child processes,
        // the seeded generator, in-memory and fault-injecting file systems.
        .target(name: "CloudletTestSupport", dependencies: ["CloudletCore", "CloudletStorage", "CloudletConcurrency"]),

        // Examples/: the seed apps as command-line programs, each runnable on an embedded store or a server.
        .target(
            name: "ExampleSupport", dependencies: ["Cloudlet", "CloudletClient", "CloudletCommandLine", "CloudletCore", "CloudletModel"],
            path: "Examples/ExampleSupport"),
        .executableTarget(name: "journal", dependencies: ["ExampleSupport", "CloudletCommandLine"], path: "Examples/journal"),
        .executableTarget(
            name: "shopping-lists", dependencies: ["ExampleSupport", "CloudletCommandLine"], path: "Examples/shopping-lists"),
        .executableTarget(name: "babifud", dependencies: ["ExampleSupport", "CloudletCommandLine"], path: "Examples/babifud"),
        .executableTarget(name: "photos", dependencies: ["ExampleSupport", "CloudletCommandLine"], path: "Examples/photos"),
        .executableTarget(name: "trips", dependencies: ["ExampleSupport", "CloudletCommandLine"], path: "Examples/trips"),

        .testTarget(name: "CloudletCoreTests", dependencies: ["CloudletCore", "CloudletTestSupport"]),
        .testTarget(name: "CloudletConcurrencyTests", dependencies: ["CloudletConcurrency"]),
        .testTarget(name: "CloudletCommandLineTests", dependencies: ["CloudletCommandLine"]),
        .testTarget(name: "CloudletWireTests", dependencies: ["CloudletWire", "CloudletCore", "CloudletModel"]),
        .testTarget(
            name: "CloudletReplicationTests", dependencies: ["CloudletReplication", "CloudletCore", "CloudletConcurrency"]),
        .testTarget(name: "CloudletStorageTests", dependencies: ["CloudletStorage", "CloudletCore", "CloudletTestSupport"]),
        .testTarget(
            name: "CloudletTests",
            dependencies: [
                "Cloudlet", "CloudletConcurrency", "CloudletCore", "CloudletMaintenance", "CloudletStorage", "CloudletWire",
                "CloudletTestSupport", "cloudlet-crash-writer",
            ]),
        .testTarget(
            name: "CloudletClientTests",
            dependencies: [
                "CloudletClient", "CloudletSync", "CloudletServer", "CloudletWire", "Cloudlet",
                "CloudletCore", "CloudletModel", "CloudletTestSupport",
                // The examples the tests run as programs.
                "journal", "shopping-lists", "babifud", "photos", "trips", "cloudlet",
            ]),
        .testTarget(
            name: "CloudletClusterTests",
            dependencies: [
                "CloudletCluster", "CloudletClient", "CloudletReplication", "Cloudlet", "CloudletCore", "CloudletWire",
                "CloudletTestSupport", "CloudletServer", "cloudlet", "cloudlet-tool",
            ]),
        .testTarget(
            name: "CloudletServerTests",
            dependencies: ["CloudletServer", "CloudletWire", "Cloudlet", "CloudletCore", "CCivetweb", "CloudletTestSupport"]),
    ]
)
