import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where the workloads put their files: the `--dir` the user named (kept), or a fresh `mkdtemp` directory under
/// `$TMPDIR` that is removed at exit, including on SIGINT and SIGTERM.
final class BenchDirectory {
    let path: String
    let isTemporary: Bool
    // Kept alive for as long as the directory is; the handlers capture only the path string.
    private let signalSources: [any DispatchSourceSignal]

    /// Uses `path`, creating it if needed, or makes a temporary directory when `path` is nil.
    init(path: String?) throws {
        if let path {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw BenchError(.io, "cannot create --dir '\(path)': \(error.localizedDescription)")
            }
            self.path = path
            isTemporary = false
            signalSources = []
            return
        }
        let tmp = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array(((tmp.hasSuffix("/") ? tmp : tmp + "/") + "cloudlet-bench.XXXXXX").utf8CString)
        guard mkdtemp(&template) != nil else { throw BenchError.io("mkdtemp", tmp) }
        let made = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        self.path = made
        isTemporary = true
        signalSources = [SIGINT, SIGTERM].map { signo in
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: .global())
            source.setEventHandler {
                Console.progress(nil)
                try? FileManager.default.removeItem(atPath: made)
                Console.error("interrupted; removed \(made)")
                exit(128 + signo)
            }
            source.resume()
            return source
        }
    }

    /// A fresh, empty subdirectory for one run of one workload.
    func makeRunDirectory(_ name: String) throws -> String {
        let dir = path + "/" + name
        try? FileManager.default.removeItem(atPath: dir)
        guard mkdir(dir, 0o755) == 0 else { throw BenchError.io("mkdir", dir) }
        return dir
    }

    func removeRunDirectory(_ dir: String) {
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// Removes the directory if it is temporary; a `--dir` is left in place.
    func cleanUp() {
        for source in signalSources { source.cancel() }
        if isTemporary { try? FileManager.default.removeItem(atPath: path) }
    }
}
