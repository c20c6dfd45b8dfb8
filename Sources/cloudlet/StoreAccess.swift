import Cloudlet
import Foundation

/// Opening a store for the administrative commands, with a clear error when a server holds it.
enum StoreAccess {
    static let defaultDirectory = "./cloudlet-data"

    /// Opens the store at `dir`. A `.locked` store (a running `cloudlet serve`) is reported as such, with the
    /// holder's pid from the lock and `hint`.
    static func open(
        _ dir: String, durability: Durability = .fsync, configuration: StoreConfiguration? = nil,
        hint: String = "Stop the server first"
    ) async throws -> CloudletStore {
        do {
            return try await CloudletStore.open(at: dir, configuration: configuration ?? StoreConfiguration(durability: durability))
        } catch let e as CloudletError where e.code == .locked {
            throw CloudletError(.locked, "\(e.message). Is `cloudlet serve` running on it? \(hint)")
        }
    }

    /// Runs `body` on the store at `dir` (fsync durability) and closes it, also when `body` throws.
    static func with<T>(_ dir: String, _ body: (CloudletStore) async throws -> T) async throws -> T {
        let store = try await open(
            dir, hint: "Stop the server first: users and tokens are managed on a stopped server's data directory")
        do {
            let result = try await body(store)
            try await store.close()
            return result
        } catch {
            try? await store.close()
            throw error
        }
    }
}

/// Output on stdout with one unbuffered `write(2)` per call, so that a reader of a pipe sees each line at once.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
