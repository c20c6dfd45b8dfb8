import Foundation
import Synchronization

/// Keeps the server's file paths out of what clients are told. The engine's error messages name files by their
/// path on the host (`segment /var/lib/cloudlet/p0001/00000000000000000001.seg offset 4096: …`), which is what an
/// operator wants in a log or from `cloudlet-tool`, but an error answered over HTTP must not show the host's
/// directory layout (issue 19). ``redact(_:)`` rewrites a message for a client: a path inside an open store becomes
/// relative to the store (`segment p0001/00000000000000000001.seg offset 4096: …`), the store's own directory
/// `the store directory`, and any other absolute path `…/` + its last component.
///
/// A store registers its directory while it is open (``register(store:)`` / ``unregister(store:)``); several
/// stores may be open in one process (tests, the tools).
public enum HostPaths {
    /// Store directories (as given and absolute) → how many open stores have them.
    private static let roots = Mutex<[String: Int]>([:])

    /// Called by a store when it opens at `directory`.
    public static func register(store directory: String) {
        roots.withLock { r in for f in forms(directory) { r[f, default: 0] += 1 } }
    }

    /// Called by a store when it closes.
    public static func unregister(store directory: String) {
        roots.withLock { r in
            for f in forms(directory) {
                let n = (r[f] ?? 1) - 1
                r[f] = n > 0 ? n : nil
            }
        }
    }

    /// `directory` without trailing slashes, and its absolute standardized form when that differs.
    private static func forms(_ directory: String) -> Set<String> {
        var d = directory
        while d.count > 1 && d.hasSuffix("/") { d.removeLast() }
        guard !d.isEmpty else { return [] }
        let absolute = d.hasPrefix("/") ? d : FileManager.default.currentDirectoryPath + "/" + d
        return [d, (absolute as NSString).standardizingPath]
    }

    /// Characters before which a path may start (besides the start of the message).
    private static let starters: Set<Character> = [" ", "\t", "\n", "'", "\"", "`", "(", "[", "=", ","]
    /// Characters that end a path.
    private static let enders: Set<Character> = [" ", "\t", "\n", "'", "\"", "`", ")", "]", ",", ":", ";"]

    /// `message` with every host path rewritten for a client (see ``HostPaths``).
    public static func redact(_ message: String) -> String {
        guard message.utf8.contains(UInt8(ascii: "/")) else { return message }
        let known = roots.withLock { Array($0.keys) }.sorted { $0.count > $1.count }
        var out = ""
        var rest = Substring(message)
        var boundary = true
        while let c = rest.first {
            guard boundary, !enders.contains(c) else {
                out.append(c)
                rest = rest.dropFirst()
                boundary = starters.contains(c)
                continue
            }
            let token = rest.prefix { !enders.contains($0) }
            rest = rest.dropFirst(token.count)
            out += rewrite(token, known: known)
            boundary = false
        }
        return out
    }

    private static func rewrite(_ token: Substring, known: [String]) -> String {
        for root in known {
            if token == root { return "the store directory" }
            if token.hasPrefix(root + "/") { return String(token.dropFirst(root.count + 1)) }
        }
        guard token.hasPrefix("/"), token.dropFirst().contains("/") else { return String(token) }
        return "…/" + (token.split(separator: "/").last.map(String.init) ?? "")
    }
}
