// swift-tools-version:6.0
import PackageDescription

// Module layout: DESIGN.md §1. Data flows API → engine → partition → log; nothing below knows what is above.
let package = Package(
    name: "Cloudlet",
    products: [
        .library(name: "Cloudlet", targets: ["Cloudlet"]),
        .executable(name: "cloudlet", targets: ["cloudlet"]),
        .executable(name: "cloudlet-tool", targets: ["cloudlet-tool"]),
        .executable(name: "cloudlet-bench", targets: ["cloudlet-bench"]),
    ],
    targets: [
        // C libraries from Debian packages (see .ci/packages).
        .systemLibrary(name: "CLZ4", pkgConfig: "liblz4", providers: [.apt(["liblz4-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
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

        .executableTarget(name: "cloudlet", dependencies: ["Cloudlet", "CloudletCore"]),
        .executableTarget(
            name: "cloudlet-tool", dependencies: ["Cloudlet", "CloudletCore", "CloudletStorage"],
            path: "Tools/cloudlet-tool"),
        .executableTarget(
            name: "cloudlet-bench", dependencies: ["Cloudlet", "CloudletCore", "CSQLite", "CRocksDB"],
            path: "Benchmarks/cloudlet-bench"),

        .testTarget(name: "CloudletCoreTests", dependencies: ["CloudletCore"]),
        .testTarget(name: "CloudletStorageTests", dependencies: ["CloudletStorage", "CloudletCore"]),
        .testTarget(name: "CloudletTests", dependencies: ["Cloudlet", "CloudletCore", "CloudletStorage"]),
    ]
)
