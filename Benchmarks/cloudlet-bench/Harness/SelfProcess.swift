import CloudletTestSupport
import Foundation

/// Runs this executable again as a child process (`scale` puts each engine's phases in processes of their own, so
/// that their memory figures are theirs alone).
enum SelfProcess {
    /// Runs `cloudlet-bench arguments…` with stdin from /dev/null and stderr shared with this process (the child's
    /// progress line and errors show as ours), waits for it, and returns what it printed on stdout. Throws if it
    /// cannot start or exits with a non-zero status.
    static func run(_ arguments: [String]) throws -> Data {
        let executable: String
        do {
            executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        } catch {
            throw BenchError(.io, "cannot find this executable through /proc/self/exe: \(error.localizedDescription)")
        }
        let stdout = Pipe()
        let devNull = open("/dev/null", O_RDONLY)
        defer { if devNull >= 0 { close(devNull) } }
        let process: SpawnedProcess
        do {
            // posix_spawn, not Foundation's Process (whose run() can crash on Linux: see SpawnedProcess).
            process = try SpawnedProcess(
                executable, arguments, stdin: devNull >= 0 ? devNull : nil, stdout: stdout.fileHandleForWriting.fileDescriptor)
            try stdout.fileHandleForWriting.close()
        } catch {
            throw BenchError(.io, "cannot start '\(executable)': \(error)")
        }
        // Read to the end before waiting: a child that fills the pipe would otherwise never exit.
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            let how = process.terminationReason == .exit ? "exited with status" : "was killed by signal"
            throw BenchError(.engine, "child '\(arguments.joined(separator: " "))' \(how) \(process.terminationStatus)")
        }
        return output
    }
}
