import Foundation
import Synchronization

/// A free TCP port on 127.0.0.1 for a child that cannot pick its own (etcd) or a server that must come back on the
/// same port after a restart (the cluster tests' nodes). The port is drawn from below the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`): a port from inside it (what binding port 0 gives) is also what the
/// kernel hands outgoing connections — a node's connection to etcd or to a peer could hold it when the node that
/// owns it restarts, and the restart fails with "address already in use". A port is checked free by binding it,
/// and never handed out twice by one process.
public func freeLoopbackPort() throws -> Int {
    let ephemeralLow = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))
        .flatMap { $0.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } } ?? 32768
    let range = 10_000..<max(10_001, min(ephemeralLow, 65_536))
    for _ in 0..<1_000 {
        let port = Int.random(in: range)
        guard handedOutPorts.withLock({ $0.insert(port).inserted }) else { continue }
        if loopbackPortIsFree(port) { return port }
    }
    throw ChildProcess.Failure(message: "no free loopback port in \(range.lowerBound)…\(range.upperBound - 1) after 1,000 tries")
}

private let handedOutPorts = Mutex<Set<Int>>([])

/// Whether 127.0.0.1:`port` can be bound now (without `SO_REUSEADDR`, so that a connection lingering on it counts).
private func loopbackPortIsFree(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = UInt16(port).bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// A real etcd (Debian's `etcd-server`, `/usr/bin/etcd`) on free loopback ports with a data directory of its own,
/// for the cluster tests: one member, listening for clients on ``url``. ``stop()`` kills it; ``restart()`` starts
/// it again on the same ports and data.
public final class EtcdProcess: @unchecked Sendable {
    // `@unchecked Sendable`: `child` is replaced only by stop/restart, which the owning test calls from one task.
    /// `http://127.0.0.1:PORT`, the client URL.
    public let url: String
    public let dataDirectory: String
    private let clientPort: Int
    private let peerPort: Int
    private var child: ChildProcess?

    /// Whether `/usr/bin/etcd` is installed (`.ci/install-deps` installs `etcd-server`).
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/etcd") }

    /// Starts etcd with its data in `directory` (created) and waits until it serves clients.
    public init(directory: String) async throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        dataDirectory = directory
        clientPort = try freeLoopbackPort()
        peerPort = try freeLoopbackPort()
        url = "http://127.0.0.1:\(clientPort)"
        try await start()
    }

    private func start() async throws {
        let peer = "http://127.0.0.1:\(peerPort)"
        let c = try ChildProcess(
            "/usr/bin/etcd",
            [
                "--name", "test", "--data-dir", dataDirectory, "--listen-client-urls", url, "--advertise-client-urls", url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "test=\(peer)",
                "--initial-cluster-state", "new", "--log-level", "info", "--logger", "zap",
            ])
        child = c
        // Ready once it logs so (no child process to spawn for a probe: on a machine busy with a parallel test run
        // that alone took longer than etcd's first election).
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline {
            if c.stderr.contains(where: { $0.contains("serving client traffic") }) { return }
            if !c.process.isRunning {
                await c.waitForExit()
                throw ChildProcess.Failure(message: "etcd exited (\(c.process.terminationStatus)): \(c.stderr.suffix(5).joined(separator: "\n"))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        c.stopBlocking(SIGKILL)
        throw ChildProcess.Failure(message: "etcd at \(url) was not ready within 90 s: \(c.stderr.suffix(5).joined(separator: "\n"))")
    }

    /// Kills etcd (SIGKILL) and waits for it.
    public func stop() async {
        if let c = child { await c.stop(SIGKILL) }
        child = nil
    }

    /// Starts etcd again on the same ports and data directory.
    public func restart() async throws {
        await stop()
        try await start()
    }

    deinit { child?.stopBlocking(SIGKILL) }
}
