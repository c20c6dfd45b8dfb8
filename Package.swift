// swift-tools-version:6.0
import PackageDescription

// Module layout: DESIGN.md §1. Data flows API → engine → partition → log; nothing below knows what is above.
let package = Package(
    name: "Cloudlet",
    products: [
        .library(name: "Cloudlet", targets: ["Cloudlet"]),
        .library(name: "CloudletServer", targets: ["CloudletServer"]),
        // Loaded at run time by the server for HTTPS (civetweb 1.15 + OpenSSL 3); see Sources/CivetSSLCompat/shim.c.
        .library(name: "CivetSSLCompat", type: .dynamic, targets: ["CivetSSLCompat"]),
        .executable(name: "cloudlet", targets: ["cloudlet"]),
        .executable(name: "cloudlet-tool", targets: ["cloudlet-tool"]),
        .executable(name: "cloudlet-bench", targets: ["cloudlet-bench"]),
    ],
    targets: [
        // C libraries from Debian packages (see .ci/packages).
        .systemLibrary(name: "CLZ4", pkgConfig: "liblz4", providers: [.apt(["liblz4-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // civetweb ships no pkg-config file; the modulemap links it.
        .systemLibrary(name: "CCivetweb", providers: [.apt(["libcivetweb-dev"])]),
        .systemLibrary(
            name: "CSQLite", path: "Benchmarks/CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // Benchmark anchor only: nothing but cloudlet-bench links RocksDB.
        .systemLibrary(
            name: "CRocksDB", path: "Benchmarks/CRocksDB", pkgConfig: "rocksdb", providers: [.apt(["librocksdb-dev"])]),

        // Value types, codec, checksums, errors. No I/O.
        .target(name: "CloudletCore"),
        // Segments, frames, group commit, recovery, checkpoints.
        .target(name: "CloudletStorage", dependencies: ["CloudletCore", "CLZ4"], exclude: ["LogFormat.md"]),
        // The embedded engine (library product).
        .target(name: "Cloudlet", dependencies: ["CloudletCore", "CloudletStorage", "COpenSSL"]),

        // HTTP(S) API compatible with CloudKit Web Services, auth, metrics.
        .target(
            name: "CloudletServer", dependencies: ["Cloudlet", "CloudletCore", "CCivetweb", "COpenSSL", "CivetStack"]),
        // Gives civetweb's threads a 4 MiB stack instead of Debian's 100 KiB; see Sources/CivetStack/stack.c.
        .target(name: "CivetStack", linkerSettings: [.linkedLibrary("dl")]),
        // A shared object with SONAME libssl.so, which civetweb's dlopen("libssl.so") then picks up. SwiftPM allows
        // unsafeFlags in root packages only: a package depending on Cloudlet can use CloudletServer, but must build
        // this library itself (or set CLOUDLET_CIVET_SSL_COMPAT) to serve HTTPS.
        .target(
            name: "CivetSSLCompat",
            linkerSettings: [
                .linkedLibrary("ssl"), .linkedLibrary("crypto"), .unsafeFlags(["-Xlinker", "-soname=libssl.so"]),
            ]),

        .executableTarget(name: "cloudlet", dependencies: ["Cloudlet", "CloudletCore", "CloudletServer"]),
        .executableTarget(
            name: "cloudlet-tool", dependencies: ["Cloudlet", "CloudletCore", "CloudletStorage"],
            path: "Tools/cloudlet-tool"),
        .executableTarget(
            name: "cloudlet-bench", dependencies: ["Cloudlet", "CloudletCore", "CloudletServer", "CCivetweb", "CSQLite", "CRocksDB"],
            path: "Benchmarks/cloudlet-bench"),
        // The writer the crash-consistency tests SIGKILL (not a product; CloudletTests depends on it so that it is
        // built with the tests).
        .executableTarget(name: "cloudlet-crash-writer", dependencies: ["Cloudlet", "CloudletCore"]),

        // Test doubles and helpers shared by the test targets (not a product): temp directories, child processes,
        // the seeded generator, in-memory and fault-injecting file systems.
        .target(name: "CloudletTestSupport", dependencies: ["CloudletCore", "CloudletStorage"]),

        .testTarget(name: "CloudletCoreTests", dependencies: ["CloudletCore", "CloudletTestSupport"]),
        .testTarget(name: "CloudletStorageTests", dependencies: ["CloudletStorage", "CloudletCore", "CloudletTestSupport"]),
        .testTarget(name: "CloudletTests", dependencies: ["Cloudlet", "CloudletCore", "CloudletStorage", "CloudletTestSupport", "cloudlet-crash-writer"]),
        .testTarget(name: "CloudletServerTests", dependencies: ["CloudletServer", "Cloudlet", "CloudletCore", "CCivetweb", "CloudletTestSupport"]),
    ]
)
