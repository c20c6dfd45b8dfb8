import CloudletConcurrency
import Foundation

/// The path of an executable of this package, built next to the test bundle in `<scratch>/<config>/` (by
/// `swift build --build-tests`).
public func builtExecutable(_ name: String) throws -> String {
    let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for dir in [bundleDir, bundleDir.deletingLastPathComponent()] {
        let candidate = dir.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw ChildProcess.Failure(message: "no \(name) executable next to \(bundleDir.path); run `swift build` first")
}

/// The built `cloudlet` executable.
public func cloudletExecutable() throws -> String { try builtExecutable("cloudlet") }

/// A child process whose stdout and stderr are collected line by line as they arrive.
///
/// `@unchecked Sendable`: the collected lines are guarded by `lock`; `process` is only read after `run()`.
public final class ChildProcess: @unchecked Sendable {
    /// A child that could not be found, exited too early, or did not print what was awaited.
    public struct Failure: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }

        public init(message: String) { self.message = message }
    }

    /// The running process (for its identifier, termination status and reason).
    public let process: SpawnedProcess
    private let outPipe = Pipe()
    private let errPipe = Pipe()
    // Guarded by `lock`.
    private let lock = NSLock()
    private var out: [String] = []
    private var err: [String] = []
    private let drained = DispatchGroup()

    /// Starts `executable` with `args` and `environment` (nil: this process's).
    public init(_ executable: String, _ args: [String], environment: [String: String]? = nil) throws {
        process = try SpawnedProcess(
            executable, args, environment: environment, stdout: outPipe.fileHandleForWriting.fileDescriptor,
            stderr: errPipe.fileHandleForWriting.fileDescriptor)
        // The child has its own copies: the readers see end of file once it exits.
        try outPipe.fileHandleForWriting.close()
        try errPipe.fileHandleForWriting.close()
        collect(outPipe.fileHandleForReading, isStdout: true)
        collect(errPipe.fileHandleForReading, isStdout: false)
    }

    private func collect(_ handle: FileHandle, isStdout: Bool) {
        drained.enter()
        Thread.detachNewThread { [self] in
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                lock.lock()
                buffer.append(chunk)
                while let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                    if isStdout { out.append(line) } else { err.append(line) }
                    buffer.removeSubrange(buffer.startIndex...nl)
                }
                lock.unlock()
            }
            if !buffer.isEmpty {  // a last line without a newline
                let line = String(decoding: buffer, as: UTF8.self)
                lock.withLock { if isStdout { out.append(line) } else { err.append(line) } }
            }
            drained.leave()
        }
    }

    /// The lines of stdout so far.
    public var stdout: [String] { lock.withLock { out } }
    /// The lines of stderr so far.
    public var stderr: [String] { lock.withLock { err } }

    /// Waits until a stdout line satisfies `match` (returns it) or the process exits or time runs out (throws). A
    /// child that times out is killed first (SIGKILL, waited for): nothing else may own it then, and a child left
    /// running would outlive its test and keep writing into the test's directory.
    ///
    /// The polling runs on a thread outside the cooperative pool: a parallel test run can keep both pool threads
    /// busy (synchronous tests run there) for seconds, and a poll on the pool then missed a line that had long
    /// arrived and reported a timeout.
    public func waitForLine(timeout: Double = 20, _ match: @escaping @Sendable (String) -> Bool) async throws -> String {
        try await ThreadBridge.offload { try self.waitForLineBlocking(timeout: timeout, match) }
    }

    private func waitForLineBlocking(timeout: Double, _ match: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = stdout.first(where: match) { return line }
            if !process.isRunning, stdout.first(where: match) == nil {
                throw Failure(message: "process exited (\(process.terminationStatus)) first; stderr: \(stderr.joined(separator: "\n"))")
            }
            usleep(5_000)
        }
        stopBlocking(SIGKILL)
        throw Failure(message: "timed out waiting for output (the process was killed); stdout: \(stdout), stderr: \(stderr)")
    }

    /// Sends `signal`, waits for the exit and for both pipes to reach EOF.
    public func stop(_ signal: Int32) async {
        kill(process.processIdentifier, signal)
        await waitForExit()
    }

    /// ``stop(_:)`` that blocks the calling thread: for `defer` blocks, which cannot await (a child that exits on
    /// its own signal does not need this process's threads to do so).
    public func stopBlocking(_ signal: Int32) {
        kill(process.processIdentifier, signal)
        waitForExitBlocking()
    }

    /// Waits for the exit and for both pipes to reach EOF, on a thread outside the cooperative pool: a test that
    /// blocked a pool thread on a child would starve the in-process servers and the engine's tasks (two threads on
    /// two cores), e.g. a `curl` child talking to a server of this process.
    public func waitForExit() async {
        await ThreadBridge.offload { self.waitForExitBlocking() }
    }

    private func waitForExitBlocking() {
        process.waitUntilExit()
        drained.wait()
    }

    /// Runs a command to completion; returns (status, stdout lines, stderr lines).
    public static func run(_ executable: String, _ args: [String]) async throws -> (status: Int32, out: [String], err: [String]) {
        let p = try ChildProcess(executable, args)
        await p.waitForExit()
        return (p.process.terminationStatus, p.stdout, p.stderr)
    }
}

/// A self-signed certificate for `127.0.0.1` and its key, made with the `openssl` command line for a TLS test.
public enum TestCertificate {
    /// Writes `cert.pem` and `key.pem` into `directory`; returns their paths.
    public static func make(in directory: String) async throws -> (certificate: String, key: String) {
        let cert = directory + "/cert.pem", key = directory + "/key.pem"
        let gen = try await ChildProcess.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj",
                "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            ])
        guard gen.status == 0 else {
            throw ChildProcess.Failure(message: "openssl req failed (\(gen.status)): \(gen.err.joined(separator: "\n"))")
        }
        return (cert, key)
    }
}
