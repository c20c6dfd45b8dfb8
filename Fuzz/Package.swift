// swift-tools-version:6.0
import PackageDescription

// libFuzzer targets for Cloudlet's decoders (docs/fuzzing.md): a package of its own, like Benchmarks/, so that the
// main package's build never compiles them. Each executable's entry point is `LLVMFuzzerTestOneInput`.
//
// Build them as `make fuzz-quick` does (Fuzz/fuzz.py), one product at a time:
//
//     ASAN_OPTIONS=detect_leaks=0 swift build --package-path Fuzz --product fuzz-frame -Xswiftc -sanitize=address \
//         -Xswiftc -sanitize-coverage=edge,trace-cmp,indirect-calls,inline-8bit-counters,pc-table
//
// The -Xswiftc flags instrument every module, Cloudlet's included (coverage for libFuzzer, ASan for unsafe
// pointers). `-sanitize=fuzzer` itself links libFuzzer's `main`, so it goes only on the fuzz targets' link below:
// given with -Xswiftc it would also reach the console-embed build tool, whose own `main` then clashes with it.
// The targets reach internal decoders through `@testable import`: debug builds compile every module with
// `-enable-testing`.

/// A fuzz target: an executable over `FuzzSupport` and the root package's `products`.
func fuzzTarget(_ name: String, _ products: [String]) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["FuzzSupport"] + products.map { .product(name: $0, package: "Cloudlet") },
        swiftSettings: [.unsafeFlags(["-parse-as-library"])],
        linkerSettings: [.unsafeFlags(["-sanitize=fuzzer,address"])])
}

let package = Package(
    name: "CloudletFuzz",
    dependencies: [
        // `name:` because a path dependency is otherwise known by its directory's name (a worktree's can be anything).
        .package(name: "Cloudlet", path: ".."),
    ],
    targets: [
        // What every target shares: the input as bytes, checksum fixing, the "documented error or trap" check.
        .target(
            name: "FuzzSupport",
            dependencies: [
                .product(name: "CloudletCore", package: "Cloudlet"),
                .product(name: "CloudletWire", package: "Cloudlet"),
            ]),
        // Log frames (FrameHeader: header, checksum, fields, LZ4 payload) and the commit payloads inside them.
        fuzzTarget("fuzz-frame", ["CloudletCore", "CloudletStorage", "Cloudlet"]),
        // RecordCodec (the record bytes stored in frames and runs).
        fuzzTarget("fuzz-record", ["CloudletCore"]),
        // Predicates: the format language, the JSON `filterBy` lists and the binary PredicateCodec.
        fuzzTarget("fuzz-predicate", ["CloudletCore", "CloudletWire"]),
        // The schema language (`cloudlet schema import`, the console).
        fuzzTarget("fuzz-schema", ["CloudletCore", "Cloudlet"]),
        // Change tokens (sync tokens) and query continuation markers.
        fuzzTarget("fuzz-tokens", ["CloudletCore", "CloudletModel", "CloudletWire", "Cloudlet"]),
        // Every route's request, through APIRouter in process over a temp store.
        fuzzTarget("fuzz-api", ["CloudletCore", "CloudletWire", "Cloudlet", "CloudletServer", "CloudletConcurrency"]),
    ]
)
