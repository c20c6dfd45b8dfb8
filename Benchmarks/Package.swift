// swift-tools-version:6.0
import PackageDescription

// cloudlet-bench (README.md next to this file) is a package of its own so that building Cloudlet needs neither
// SQLite nor RocksDB, its anchors. It uses the root package through library products only:
// `swift run -c release --package-path Benchmarks cloudlet-bench --quick` from the repository root.
let package = Package(
    name: "CloudletBenchmarks",
    dependencies: [
        // `name:` because a path dependency is otherwise known by its directory's name, which for a clone or a
        // worktree can be anything.
        .package(name: "Cloudlet", path: ".."),
    ],
    targets: [
        // The anchors, from Debian packages (see ../.ci/packages).
        .systemLibrary(name: "CSQLite", path: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CRocksDB", path: "CRocksDB", pkgConfig: "rocksdb", providers: [.apt(["librocksdb-dev"])]),

        .executableTarget(
            name: "cloudlet-bench",
            dependencies: [
                .product(name: "Cloudlet", package: "Cloudlet"),
                .product(name: "CloudletCore", package: "Cloudlet"),
                // ThreadBridge.wait: workloads call the async engine from their own threads.
                .product(name: "CloudletConcurrency", package: "Cloudlet"),
                .product(name: "CloudletCommandLine", package: "Cloudlet"),
                .product(name: "CloudletServer", package: "Cloudlet"),
                // The client library and the sync engine, for the client-* and sync-from-zero rows.
                .product(name: "CloudletClient", package: "Cloudlet"),
                .product(name: "CloudletSync", package: "Cloudlet"),
                // civetweb's websocket client, for the notify workloads.
                .product(name: "CCivetweb", package: "Cloudlet"),
                // Child processes and free ports, for replicated-fillsync-concurrent (cloudlet serve, etcd).
                .product(name: "CloudletTestSupport", package: "Cloudlet"),
                "CSQLite",
                "CRocksDB",
            ],
            path: "cloudlet-bench"),
    ]
)
