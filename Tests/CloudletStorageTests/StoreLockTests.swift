import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@Suite("Store lock")
struct StoreLockTests {
    @Test("a second lock on the same directory is refused with the holder's pid; after release it succeeds")
    func exclusive() async throws {
        try await withTempDirectory { dir in
            let store = dir + "/store"
            let first = try StoreLock(directory: store)
            let error = cloudletError { _ = try StoreLock(directory: store) }
            #expect(error?.code == .locked)
            #expect(error?.message.contains("\(store) is locked by another process (pid \(getpid()))") == true)
            // The pid's line, padded to 16 bytes (written over the old content, no truncation).
            let pid = try String(contentsOfFile: store + "/LOCK", encoding: .utf8)
            #expect(pid.split(separator: "\n").first.map(String.init) == "\(getpid())" && pid.utf8.count == 16)
            first.release()
            first.release()
            // A longer line left by an older holder is overwritten whole.
            try Array("123456789012345\n".utf8).withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: store + "/LOCK")) }
            let second = try StoreLock(directory: store)
            let after = try String(contentsOfFile: store + "/LOCK", encoding: .utf8)
            #expect(after.split(separator: "\n").first.map(String.init) == "\(getpid())")
            second.release()
        }
    }

    @Test("the lock holds against another process")
    func otherProcess() async throws {
        try await withTempDirectory { dir in
            let lock = try StoreLock(directory: dir)
            let args = ["--nonblock", "--conflict-exit-code", "42", dir + "/LOCK", "true"]
            let probe = try SpawnedProcess("/usr/bin/flock", args)
            await probe.exit()
            #expect(probe.terminationStatus == 42)
            lock.release()
            let after = try SpawnedProcess("/usr/bin/flock", args)
            await after.exit()
            #expect(after.terminationStatus == 0)
        }
    }

    @Test("shared holders (offline readers) coexist, keep writers out, and are kept out by a writer")
    func shared() async throws {
        try await withTempDirectory { dir in
            let writer = try StoreLock(directory: dir)
            let refused = cloudletError { _ = try StoreLock(sharedOn: dir) }
            #expect(refused?.code == .locked)
            #expect(refused?.message.contains("open for writing by another process (pid \(getpid()))") == true)
            writer.release()
            let a = try StoreLock(sharedOn: dir)
            let b = try StoreLock(sharedOn: dir)
            let blocked = cloudletError { _ = try StoreLock(directory: dir) }
            #expect(blocked?.code == .locked)
            #expect(blocked?.message.contains("being read by an offline tool") == true)
            a.release()
            b.release()
            try StoreLock(directory: dir).release()
        }
    }
}
