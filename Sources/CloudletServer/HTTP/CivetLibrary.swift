import CCivetweb
import Foundation

/// Process-wide set-up of civetweb: loads the TLS compatibility library, then calls `mg_init_library` once.
///
/// Debian's civetweb 1.15 crashes on every HTTPS connection with OpenSSL 3 unless `libCivetSSLCompat.so` (built
/// by this package, SONAME `libssl.so`) is loaded with `RTLD_GLOBAL` before `mg_init_library`; see
/// `Sources/CivetSSLCompat/shim.c`. Where the library is not found, civetweb is initialized without TLS and
/// HTTPS listeners are refused with an error saying why.
enum CivetLibrary {
    /// Environment variable naming the compatibility library explicitly.
    static let compatPathVariable = "CLOUDLET_CIVET_SSL_COMPAT"
    static let compatFileName = "libCivetSSLCompat.so"

    /// Whether TLS is available, or why not. Evaluated once (Swift globals are initialized exactly once).
    static let tls: Result<String, ServerSetupError> = initialize()

    private static func initialize() -> Result<String, ServerSetupError> {
        var tried: [String] = []
        var loaded: String?
        for path in candidatePaths() {
            tried.append(path)
            guard FileManager.default.fileExists(atPath: path) else { continue }
            if dlopen(path, RTLD_NOW | RTLD_GLOBAL) != nil {
                loaded = path
                break
            }
            let reason = dlerror().map { String(cString: $0) } ?? "unknown error"
            tried[tried.count - 1] += " (\(reason))"
        }
        if let loaded {
            _ = mg_init_library(UInt32(MG_FEATURES_TLS) | UInt32(MG_FEATURES_WEBSOCKET))
            return .success(loaded)
        }
        _ = mg_init_library(UInt32(MG_FEATURES_WEBSOCKET))
        return .failure(
            ServerSetupError(
                "HTTPS is unavailable: \(compatFileName) was not found (tried \(tried.joined(separator: ", "))); "
                    + "build it with `swift build` (it is the CivetSSLCompat product) or set \(compatPathVariable)"))
    }

    private static func candidatePaths() -> [String] {
        var out: [String] = []
        if let explicit = ProcessInfo.processInfo.environment[compatPathVariable], !explicit.isEmpty {
            out.append(explicit)
        }
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            let dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
            out.append(dir.appendingPathComponent(compatFileName).path)
            out.append(dir.deletingLastPathComponent().appendingPathComponent("lib/" + compatFileName).path)
        }
        return out
    }
}
