import CloudletTestSupport
import Foundation

/// A running `cloudlet serve` child: its URL and, on a fresh store, the bootstrap tokens it printed.
struct ServeChild {
    let child: ChildProcess
    let url: String
    let apiToken: String?
    let webAuthToken: String?
    /// The admin credential a fresh store gets (for the console and `/cloudlet/admin/*`).
    let adminToken: String?

    /// Starts `cloudlet serve --port 0 --data DIR …` and waits until it listens (and has printed its tokens).
    static func start(data: String, extra: [String] = []) async throws -> ServeChild {
        let child = try ChildProcess(try cloudletExecutable(), ["serve", "--port", "0", "--data", data] + extra)
        let line = try await child.waitForLine { $0.hasPrefix("listening on ") }
        let url = String(line.dropFirst("listening on ".count))
        // On a fresh store the tokens are printed before the "listening on" line.
        func value(_ key: String) -> String? {
            child.stdout.first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(key + ": ") }
                .map { String($0.trimmingCharacters(in: .whitespaces).dropFirst(key.count + 2)) }
        }
        return ServeChild(
            child: child, url: url, apiToken: value("ckAPIToken"), webAuthToken: value("ckWebAuthToken"),
            adminToken: value("admin credential"))
    }
}
