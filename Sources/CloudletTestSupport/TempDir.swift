import Foundation

/// A fresh directory under the temp dir (`$TMPDIR`, else `/tmp`), made by `mkdtemp` and removed with everything in
/// it when the value is released.
public final class TempDir: Sendable {
    /// The directory's absolute path, e.g. `/tmp/crash-a1B2c3`.
    public let path: String

    /// Creates `<temp dir>/<name>-XXXXXX`.
    public init(_ name: String = "cloudlet-test") {
        var base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        var template = Array("\(base)/\(name)-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { buffer -> String in
            guard let made = mkdtemp(buffer.baseAddress!) else { fatalError("mkdtemp in \(base): errno \(errno)") }
            return String(cString: made)
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// `path/name` (not created).
    public func sub(_ name: String) -> String { path + "/" + name }
}

/// Runs `body` with the path of a fresh ``TempDir``, removed afterwards.
public func withTempDirectory<R>(_ body: (String) async throws -> R) async rethrows -> R {
    let dir = TempDir()
    defer { withExtendedLifetime(dir) {} }
    return try await body(dir.path)
}

/// Runs `body`, then `cleanup`, whether `body` returned or threw: an awaited `defer`. (`defer { Task { … } }` runs the
/// cleanup after the test has ended, concurrently with the next one, or never if the process exits first.)
public func withCleanup<R>(_ cleanup: () async -> Void, _ body: () async throws -> R) async rethrows -> R {
    do {
        let r = try await body()
        await cleanup()
        return r
    } catch {
        await cleanup()
        throw error
    }
}
