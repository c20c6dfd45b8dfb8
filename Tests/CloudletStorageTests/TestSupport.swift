import Foundation
import Testing

/// Runs `body` with a fresh directory under the temp dir (mkdtemp), removed afterwards.
func withTempDirectory<R>(_ body: (String) async throws -> R) async rethrows -> R {
    var template = Array((NSTemporaryDirectory() + "cloudlet-storage-XXXXXX").utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer -> String in
        guard let made = mkdtemp(buffer.baseAddress!) else { fatalError("mkdtemp failed: errno \(errno)") }
        return String(cString: made)
    }
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}
