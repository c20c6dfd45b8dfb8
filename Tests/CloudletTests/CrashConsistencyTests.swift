import CloudletCore
import Foundation
import Testing

@testable import Cloudlet

/// The built `cloudlet` executable, next to the test bundle in `.build/<config>/`.
func cloudletExecutable() throws -> String {
    let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for dir in [bundleDir, bundleDir.deletingLastPathComponent()] {
        let candidate = dir.appendingPathComponent("cloudlet").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw CloudletError(.notSupported, "no cloudlet executable next to \(bundleDir.path); run `swift build` first")
}

/// Runs a child process and collects its stdout lines as they arrive.
final class ChildProcess: @unchecked Sendable {
    let process = Process()
    private let pipe = Pipe()
    // Guarded by `lock`.
    private var buffer = Data()
    private var lines: [String] = []
    private let lock = NSLock()
    private let done = DispatchSemaphore(value: 0)

    init(_ executable: String, _ args: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = args
        process.standardOutput = pipe
        process.standardError = FileHandle.standardError
        try process.run()
        let handle = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                lock.lock()
                buffer.append(chunk)
                while let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...nl)
                }
                lock.unlock()
            }
            done.signal()
        }
    }

    var lineCount: Int { lock.withLock { lines.count } }

    /// Kills with SIGKILL, waits for exit and for stdout to reach EOF; returns every complete line.
    func kill() -> [String] {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        done.wait()
        return lock.withLock { lines }
    }
}

@Suite(.serialized) struct CrashConsistencyTests {
    @Test func everyAcknowledgedWriteSurvivesSIGKILL() async throws {
        let exe = try cloudletExecutable()
        let dir = TempDir("crash")
        let data = dir.sub("store")
        var rng = SeededRandom(seed: 42)
        var acked: [(zone: String, name: String)] = []
        for round in 0..<12 {
            let child = try ChildProcess(exe, ["crash-writer", "--data", data, "--prefix", "r\(round)"])
            // Let it run until a random number of acknowledgements (or a time limit), then kill it mid-write.
            let target = Int.random(in: 5...400, using: &rng)
            let deadline = Date().addingTimeInterval(10)
            while child.lineCount < target + 1 && Date() < deadline { try await Task.sleep(for: .milliseconds(2)) }
            let lines = child.kill()
            #expect(child.process.terminationReason == .uncaughtSignal, "round \(round): writer died on its own")
            for line in lines where line.hasPrefix("ack ") {
                let parts = line.split(separator: " ")
                acked.append((String(parts[1]), String(parts[2])))
            }
            // Reopen (recovery of a torn tail included) and check every acknowledgement so far.
            let store = try await CloudletStore.open(at: data)
            let db = try store.container("iCloud.com.example.crash").privateDatabase(user: "crash")
            var missing: [String] = []
            for (zone, name) in acked {
                guard let r = try? await db.record(for: RecordID(recordName: name, zoneID: ZoneID(zoneName: zone))) else {
                    missing.append("\(zone)/\(name)")
                    continue
                }
                let seq = Int(name.split(separator: "-").last!)!
                #expect(r["seq"] == .int64(Int64(seq)))
                #expect(r["body"] == .string(String(repeating: "x", count: (seq * 37) % 700)))
            }
            #expect(missing.isEmpty, "round \(round): \(missing.count) acknowledged records lost, e.g. \(missing.prefix(5))")
            try await store.close()
        }
        #expect(acked.count > 12, "the writers acknowledged too little to test anything")
    }
}
