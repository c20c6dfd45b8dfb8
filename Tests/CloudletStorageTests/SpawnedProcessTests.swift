import CloudletTestSupport
import Foundation
import Testing

/// The tests' way of starting programs (posix_spawn; Foundation's `Process.run()` can crash on Linux): what the
/// child inherits, what it is told, and how it ended.
@Suite struct SpawnedProcessTests {
    @Test func theChildInheritsNoDescriptorButItsStandardOnes() throws {
        // A descriptor of this process without close-on-exec, which a plain fork/exec would hand down.
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        let r = try SpawnedProcess.run("/bin/ls", ["/proc/self/fd"])
        let fds = String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").compactMap { Int($0) }.sorted()
        #expect(r.status == 0 && r.reason == .exit)
        // 0, 1, 2, and the directory ls itself has open to list them.
        #expect(fds.count == 4 && fds.prefix(3) == [0, 1, 2], "\(fds)")
    }

    @Test func environmentInputOutputAndStatusComeThrough() throws {
        let r = try SpawnedProcess.run(
            "/bin/sh", ["-c", "read line; echo \"$GREETING $line\"; echo oops >&2; exit 3"], environment: ["GREETING": "hello"],
            input: Data("world\n".utf8))
        #expect(String(decoding: r.stdout, as: UTF8.self) == "hello world\n")
        #expect(String(decoding: r.stderr, as: UTF8.self) == "oops\n")
        #expect(r.status == 3 && r.reason == .exit)
    }

    @Test func aSignalledChildReportsTheSignal() async throws {
        let child = try SpawnedProcess("/bin/sleep", ["30"])
        #expect(child.isRunning)
        kill(child.processIdentifier, SIGKILL)
        await child.exit()
        #expect(!child.isRunning)
        #expect(child.terminationReason == .uncaughtSignal && child.terminationStatus == SIGKILL)
    }
}
