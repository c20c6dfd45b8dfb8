import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Log failures and crashes (in-memory and fault-injecting file systems)")
struct LogFailureTests {
    @Test("after a crash, every acknowledged frame survives and nothing beyond a prefix of the staged ones appears",
          arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func crashKeepsAcknowledgedPrefix(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let fs = InMemoryFileSystem()
        let configuration = config(segmentSize: 700)
        let (log, _) = try openCollecting("/store/p1", configuration, fileSystem: fs)
        var staged: [Staged] = []
        var acknowledged: UInt64 = 0
        for round in 0..<30 {
            let batch = Int.random(in: 1...6, using: &rng)
            for i in 0..<batch {
                let payload =
                    i % 3 == 0 ? compressibleBytes(Int.random(in: 256..<900, using: &rng), tag: round)
                    : randomBytes(Int.random(in: 1..<150, using: &rng), &rng)
                let (lsn, position) = try log.stage(type: 1, payload: payload)
                staged.append(Staged(lsn: lsn, position: position, type: 1, payload: payload))
            }
            if Bool.random(using: &rng) {
                try await log.waitDurable(staged.last!.lsn)
                acknowledged = staged.last!.lsn
            }
        }
        // Power fails now, with a group maybe still being written; the disk kept a random part of unsynced bytes.
        let keepSeed = rng.next()
        fs.crash { path, unsynced in Int(truncatingIfNeeded: (keepSeed ^ UInt64(path.utf8.count)) % UInt64(unsynced + 1)) }
        try? log.close()

        let (recovered, replayed) = try openCollecting("/store/p1", configuration, fileSystem: fs)
        #expect(replayed.count >= Int(acknowledged), "seed \(seed): acknowledged \(acknowledged), got \(replayed.count)")
        expectSame(replayed, staged.prefix(replayed.count))
        // The recovered log takes new frames after the prefix.
        let (lsn, _) = try recovered.stage(type: 3, payload: [42])
        try await recovered.waitDurable(lsn)
        #expect(lsn == UInt64(replayed.count) + 1)
        try recovered.close()
    }

    @Test("a failed fdatasync fails the waiter and makes the log read-only for good")
    func failedFdatasync() async throws {
        let fs = FaultInjectingFileSystem(wrapping: InMemoryFileSystem())
        let (log, _) = try openCollecting("/p", partition: 3, config(), fileSystem: fs)
        let (first, _) = try log.stage(type: 1, payload: [1])
        try await log.waitDurable(first)

        fs.failFdatasync(nth: 1)
        let (second, _) = try log.stage(type: 1, payload: [2])
        var message = ""
        do {
            try await log.waitDurable(second)
            Issue.record("waitDurable succeeded after a failed fdatasync")
        } catch let error as CloudletError {
            #expect(error.code == .readOnly)
            message = error.message
        }
        #expect(message.contains("partition 3 is read-only after a failed fdatasync on /p/00000000000000000001.seg"))
        #expect(message.contains(String(cString: strerror(EIO))))
        #expect(log.failure?.message == message)
        #expect(log.durableLSN == first)
        #expect(cloudletError { _ = try log.stage(type: 1, payload: [3]) }?.message == message)
        #expect(cloudletError { try log.waitDurableBlocking(second) }?.code == .readOnly)
        try await log.waitDurable(first)  // what was durable stays durable
        let syncs = fs.fdatasyncCount
        #expect(cloudletError { try log.close() }?.message == message)
        #expect(fs.fdatasyncCount == syncs, "close must not retry the failed fdatasync")
    }

    @Test("onFailure tells the owner of the first failure once, and a handler registered later at once")
    func failureHandler() async throws {
        let fs = FaultInjectingFileSystem(wrapping: InMemoryFileSystem())
        let (log, _) = try openCollecting("/p", config(), fileSystem: fs)
        let told = Mutex<[String]>([])
        log.onFailure { failure in told.withLock { $0.append(failure.message) } }
        fs.failFdatasync(nth: 1)
        let (lsn, _) = try log.stage(type: 1, payload: [1])
        await #expect(throws: CloudletError.self) { try await log.waitDurable(lsn) }
        #expect(told.withLock { $0 } == [log.failure?.message])
        _ = try? log.close()
        #expect(told.withLock { $0.count } == 1, "closing a failed log is no new failure")
        let late = Mutex<String?>(nil)
        log.onFailure { failure in late.withLock { $0 = failure.message } }
        #expect(late.withLock { $0 } == log.failure?.message)
    }

    @Test("a full disk fails the write: waiters get ENOSPC as quotaExceeded, nothing is retried")
    func noSpace() async throws {
        let fs = FaultInjectingFileSystem(wrapping: InMemoryFileSystem())
        let (log, _) = try openCollecting("/p", config(), fileSystem: fs)
        fs.failWrites(errno: ENOSPC)
        let (lsn, _) = try log.stage(type: 1, payload: [1, 2, 3])
        await #expect(throws: CloudletError.self) { try await log.waitDurable(lsn) }
        #expect(log.failure?.code == .quotaExceeded)
        #expect(log.failure?.message.contains("failed pwrite") == true)
        #expect(log.failure?.message.contains(String(cString: strerror(ENOSPC))) == true)
        let writes = fs.writeCount
        #expect(cloudletError { _ = try log.stage(type: 1, payload: [4]) }?.code == .quotaExceeded)
        #expect(fs.writeCount == writes)
        _ = try? log.close()
    }

    /// The callback a partition's writer hands its caller's continuation to (`Partition.commit(untilDurable:)`).
    @Test("whenDurable calls back at once for a durable LSN, after the fdatasync for a staged one, with the failure of a failed one, and with readOnly once closed")
    func whenDurableCallbacks() async throws {
        let fs = FaultInjectingFileSystem(wrapping: InMemoryFileSystem())
        let (log, _) = try openCollecting("/p", partition: 4, config(), fileSystem: fs)
        let outcomes = Mutex<[String]>([])
        @Sendable func note(_ name: String) -> @Sendable (Result<Void, any Error>) -> Void {
            { outcome in
                let text: String
                switch outcome {
                case .success: text = "durable"
                case .failure(let error as CloudletError): text = "\(error.code)"
                case .failure(let error): text = "\(error)"
                }
                outcomes.withLock { $0.append("\(name): \(text)") }
            }
        }
        let (first, _) = try log.stage(type: 1, payload: [1])
        try await log.waitDurable(first)
        log.whenDurable(first, note("first"))
        #expect(outcomes.withLock { $0 } == ["first: durable"], "a durable LSN is answered on the calling thread")

        fs.stallFdatasync()
        let (second, _) = try log.stage(type: 1, payload: [2])
        pollUntil { fs.stalledFdatasyncCalls == 1 }
        try #require(fs.stalledFdatasyncCalls == 1, "the committer is in its fdatasync")
        log.whenDurable(second, note("second"))
        #expect(outcomes.withLock { $0.count } == 1, "called back before its frame was durable")
        fs.resumeFdatasync()
        pollUntil { outcomes.withLock { $0.count } == 2 }
        try #require(outcomes.withLock { $0.count } == 2, "the second callback")
        #expect(log.durableLSN >= second)

        fs.failFdatasync(nth: 1)
        let (third, _) = try log.stage(type: 1, payload: [3])
        log.whenDurable(third, note("third"))
        pollUntil { outcomes.withLock { $0.count } == 3 }
        try #require(outcomes.withLock { $0.count } == 3, "the third callback")
        log.whenDurable(third + 1, note("never staged"))
        _ = try? log.close()
        log.whenDurable(third, note("after close"))
        let readOnly = "\(CloudletError.Code.readOnly)"
        #expect(outcomes.withLock { $0 } == [
            "first: durable", "second: durable", "third: \(readOnly)", "never staged: \(readOnly)",
            "after close: \(readOnly)",
        ])
    }

    @Test("a write torn part-way by a dying process leaves a torn tail that the next open truncates")
    func tornWrite() async throws {
        let memory = InMemoryFileSystem()
        let fs = FaultInjectingFileSystem(wrapping: memory)
        let (log, _) = try openCollecting("/p", config(), fileSystem: fs)
        let staged = try stageAll(log, [[1], [2, 2], [3, 3, 3]])
        fs.tearWrite(nth: 1, keeping: 45)
        let (lsn, _) = try log.stage(type: 1, payload: [UInt8](repeating: 9, count: 100))
        await #expect(throws: CloudletError.self) { try await log.waitDurable(lsn) }
        _ = try? log.close()
        #expect(memory.contents(of: "/p/00000000000000000001.seg")?.count == Int(staged.last!.position.end) + 45)

        let (reopened, replayed) = try openCollecting("/p", config(), fileSystem: memory)
        expectSame(replayed, staged)
        #expect(reopened.recovery.tornTail?.offset == staged.last!.position.end)
        #expect(reopened.recovery.tornTail?.droppedBytes == 45)
        #expect(memory.contents(of: "/p/00000000000000000001.seg")?.count == Int(staged.last!.position.end))
        try reopened.close()
    }
}
