import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Synchronization
import Testing

@Suite("Group commit")
struct CommitterTests {
    @Test("32 concurrent writers share fdatasyncs: fsyncs < commits, everything durable")
    func groupCommit() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, config())
            let writers = 32
            let perWriter = 40
            let lsns = try await withThrowingTaskGroup(of: [UInt64].self) { group in
                for w in 0..<writers {
                    group.addTask {
                        var mine: [UInt64] = []
                        for i in 0..<perWriter {
                            let (lsn, _) = try log.stage(type: 1, payload: Array("writer \(w) frame \(i)".utf8))
                            try await log.waitDurable(lsn)
                            #expect(log.durableLSN >= lsn)
                            mine.append(lsn)
                        }
                        return mine
                    }
                }
                var all: [[UInt64]] = []
                for try await mine in group { all.append(mine) }
                return all
            }
            let total = writers * perWriter
            for mine in lsns { #expect(mine == mine.sorted()) }
            #expect(Set(lsns.joined()) == Set(1...UInt64(total)))
            let stats = log.stats
            #expect(stats.commits == total)
            #expect(stats.fsyncs < stats.commits, "\(stats)")
            #expect(stats.groups < stats.commits, "\(stats)")
            #expect(log.durableLSN == UInt64(total))
            try log.close()
            let (reopened, replayed) = try openCollecting(dir, config())
            #expect(replayed.count == total)
            try reopened.close()
        }
    }

    @Test("stage blocks while maxPendingBytes are staged but unwritten, and resumes when the committer catches up")
    func backpressure() async throws {
        let (log, fs) = try stalledLog()

        // Incompressible payloads, so that each frame takes 432 bytes.
        var rng = SeededRandom(seed: 1)
        let payloads = (0..<7).map { _ in randomBytes(400, &rng) }
        // The first frame goes to the committer, which then stalls inside its fdatasync.
        let (first, _) = try log.stage(type: 1, payload: payloads[0])
        let staged = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            for payload in payloads.dropFirst() {
                #expect(throws: Never.self) { try log.stage(type: 1, payload: payload) }
                staged.add(1, ordering: .relaxed)
            }
            done.signal()
        }
        // 432 bytes in flight + 432 pending fit under 1000; the next one must wait.
        for _ in 0..<500 where staged.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(staged.load(ordering: .relaxed) == 1)
        #expect(log.durableLSN < first)
        fs.resumeFdatasync()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(staged.load(ordering: .relaxed) == 6)
        try log.flush()
        #expect(log.durableLSN == 7)
        try log.close()
    }

    @Test("async writers wait for room by suspending, then stage over the limit without blocking")
    func asyncBackpressure() async throws {
        let (log, fs) = try stalledLog()
        var rng = SeededRandom(seed: 2)
        // 432-byte frames: the first goes to the (stalled) committer; with admitOverLimit nothing blocks.
        _ = try log.stage(type: 1, payload: randomBytes(400, &rng))
        for _ in 0..<4 { _ = try log.stage(type: 1, payload: randomBytes(400, &rng), admitOverLimit: true) }
        #expect(log.lastLSN == 5)
        let waited = Atomic<Bool>(false)
        let waiter = Task {
            try await log.waitForRoom()
            waited.store(true, ordering: .releasing)
        }
        try await Task.sleep(for: .milliseconds(200))
        let early = waited.load(ordering: .acquiring)
        #expect(!early, "no room while 1728 bytes are unwritten")
        fs.resumeFdatasync()
        try await waiter.value
        let late = waited.load(ordering: .acquiring)
        #expect(late && log.durableLSN == 5)
        // Room now: returns at once.
        try await log.waitForRoom()
        try log.close()
    }

    @Test("a task cancelled while it waits for room or for durability stops with CancellationError; the frames still become durable")
    func cancelledWaitsStop() async throws {
        let (log, fs) = try stalledLog()
        var rng = SeededRandom(seed: 3)
        for _ in 0..<4 { _ = try log.stage(type: 1, payload: randomBytes(400, &rng), admitOverLimit: true) }
        let forRoom = Task { try await log.waitForRoom() }
        let forDurability = Task { try await log.waitDurable(4) }
        // Both are waiting (or about to): cancelling either stops it whichever it is.
        forRoom.cancel()
        forDurability.cancel()
        await #expect(throws: CancellationError.self) { try await forRoom.value }
        await #expect(throws: CancellationError.self) { try await forDurability.value }
        #expect(log.durableLSN < 4, "nothing became durable while the disk was stalled")
        fs.resumeFdatasync()
        try await log.waitDurable(4)
        #expect(log.durableLSN == 4)
        try log.close()
    }

    /// A log on an in-memory file system whose fdatasyncs wait (``FaultInjectingFileSystem/stallFdatasync(matching:)``)
    /// and that holds at most 1000 bytes staged but unwritten.
    private func stalledLog() throws -> (Log, FaultInjectingFileSystem) {
        let fs = FaultInjectingFileSystem(wrapping: InMemoryFileSystem())
        var configuration = config()
        configuration.maxPendingBytes = 1000
        let log = try Log.open(directory: "/log", partition: 1, configuration: configuration, fileSystem: fs) { _ in }
        fs.stallFdatasync()
        return (log, fs)
    }
}
