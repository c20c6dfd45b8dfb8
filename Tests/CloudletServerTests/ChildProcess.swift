import Foundation
import Testing

/// The built `cloudlet` executable, next to the test bundle in `<scratch>/<config>/`.
func cloudletExecutable() throws -> String {
    let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for dir in [bundleDir, bundleDir.deletingLastPathComponent()] {
        let candidate = dir.appendingPathComponent("cloudlet").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw ChildProcess.Failure(message: "no cloudlet executable next to \(bundleDir.path); run `swift build` first")
}

/// A child process whose stdout and stderr are collected line by line as they arrive.
final class ChildProcess: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    let process = Process()
    private let outPipe = Pipe()
    private let errPipe = Pipe()
    // Guarded by `lock`.
    private let lock = NSLock()
    private var out: [String] = []
    private var err: [String] = []
    private let drained = DispatchGroup()

    init(_ executable: String, _ args: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = args
        process.standardOutput = outPipe
        process.standardError = errPipe
        try process.run()
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

    var stdout: [String] { lock.withLock { out } }
    var stderr: [String] { lock.withLock { err } }

    /// Waits until a stdout line satisfies `match` (returns it) or the process exits or time runs out (throws).
    func waitForLine(timeout: Double = 20, _ match: (String) -> Bool) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = stdout.first(where: match) { return line }
            if !process.isRunning, stdout.first(where: match) == nil {
                throw Failure(message: "process exited (\(process.terminationStatus)) first; stderr: \(stderr.joined(separator: "\n"))")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw Failure(message: "timed out waiting for output; stdout: \(stdout), stderr: \(stderr)")
    }

    /// Sends `signal`, waits for the exit and for both pipes to reach EOF.
    func stop(_ signal: Int32) {
        kill(process.processIdentifier, signal)
        waitForExit()
    }

    func waitForExit() {
        process.waitUntilExit()
        drained.wait()
    }

    /// Runs a command to completion; returns (status, stdout lines, stderr lines).
    static func run(_ executable: String, _ args: [String]) throws -> (status: Int32, out: [String], err: [String]) {
        let p = try ChildProcess(executable, args)
        p.waitForExit()
        return (p.process.terminationStatus, p.stdout, p.stderr)
    }
}

/// A running `cloudlet serve` child: its URL and, on a fresh store, the bootstrap tokens it printed.
struct ServeChild {
    let child: ChildProcess
    let url: String
    let apiToken: String?
    let webAuthToken: String?

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
        return ServeChild(child: child, url: url, apiToken: value("ckAPIToken"), webAuthToken: value("ckWebAuthToken"))
    }
}
