import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

/// A leader's log with `count` frames (epoch `epoch`, small segments so that they roll), its frames read back
/// verbatim in one batch.
private func leaderLog(
    _ fs: any FileSystem, count: Int, epoch: UInt64 = 3, seed: UInt64 = 1, directory: String = "/leader/p7"
) throws -> (Log, [Staged]) {
    var rng = SeededRandom(seed: seed)
    var c = config(segmentSize: 900)
    c.epoch = epoch
    let (log, _) = try openCollecting(directory, c, fileSystem: fs)
    let payloads = (0..<count).map { i in
        i % 2 == 0 ? compressibleBytes(300 + i, tag: i) : randomBytes(Int.random(in: 1..<200, using: &rng), &rng)
    }
    return (log, try stageAll(log, payloads))
}

/// A leader's log of `count` frames of epoch 3 in one large segment, flushed (what followers tail), and its file system.
private func tailedLeader(frames count: Int) throws -> (Log, InMemoryFileSystem) {
    let fs = InMemoryFileSystem()
    var c = config(segmentSize: 1 << 20)
    c.epoch = 3
    let (log, _) = try openCollecting("/leader/p7", c, fileSystem: fs)
    for i in 0..<count { _ = try log.stage(type: 1, payload: compressibleBytes(100, tag: i)) }
    try log.flush()
    return (log, fs)
}

/// Every stored frame of `log` from `lsn`, in batches of at most `maxBytes`, concatenated.
private func allFrames(_ log: Log, from lsn: UInt64 = 1, maxBytes: Int = 1 << 20) throws -> [UInt8] {
    var bytes: [UInt8] = []
    var next = lsn
    while true {
        let batch = try log.frames(from: next, maxBytes: maxBytes)
        if batch.lastLSN < batch.firstLSN { return bytes }
        #expect(batch.firstLSN == next)
        bytes += batch.bytes
        next = batch.lastLSN + 1
    }
}

/// The bytes of the frames of a log from its segment files (headers skipped), as stored.
private func storedBytes(_ log: Log) throws -> [UInt8] {
    try log.segments().flatMap { s in
        s.size > 48 ? try log.readSegment(s.firstLSN, offset: 48, count: Int(s.size) - 48) : []
    }
}

/// Fails every mutating call (remove, directory fsync, truncate, fdatasync, write) once `budget` of them have run,
/// as a process killed at that instant would stop; the in-memory file system underneath then "crashes".
private final class StepLimitedFileSystem: FileSystem, @unchecked Sendable {
    // @unchecked: `steps` is touched only by the test's single thread.
    let base: InMemoryFileSystem
    var steps = 0
    let budget: Int

    init(_ base: InMemoryFileSystem, budget: Int) {
        self.base = base
        self.budget = budget
    }

    func step(_ operation: String, _ path: String) throws(FileSystemError) {
        steps += 1
        if steps > budget { throw FileSystemError(operation: operation, path: path, errno: 5) }
    }

    func open(_ path: String, options: OpenOptions) throws(FileSystemError) -> any File {
        StepLimitedFile(base: try base.open(path, options: options), fs: self, path: path)
    }
    func listDirectory(_ path: String) throws(FileSystemError) -> [String] { try base.listDirectory(path) }
    func createDirectory(_ path: String) throws(FileSystemError) { try base.createDirectory(path) }
    func rename(_ from: String, to: String) throws(FileSystemError) {
        try step("rename", from)
        try base.rename(from, to: to)
    }
    func remove(_ path: String) throws(FileSystemError) {
        try step("remove", path)
        try base.remove(path)
    }
    func fsyncDirectory(_ path: String) throws(FileSystemError) {
        try step("fsync", path)
        try base.fsyncDirectory(path)
    }
    func fileExists(_ path: String) -> Bool { base.fileExists(path) }
    func lockFile(_ path: String, exclusive: Bool) throws(FileSystemError) -> any FileLock {
        try base.lockFile(path, exclusive: exclusive)
    }
}

private final class StepLimitedFile: File, @unchecked Sendable {
    // @unchecked: used by the test's single thread only (see StepLimitedFileSystem).
    let base: any File
    let fs: StepLimitedFileSystem
    let path: String

    init(base: any File, fs: StepLimitedFileSystem, path: String) {
        self.base = base
        self.fs = fs
        self.path = path
    }

    func pread(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int {
        try base.pread(into: buffer, at: offset)
    }
    func pwrite(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError) {
        try fs.step("pwrite", path)
        try base.pwrite(bytes, at: offset)
    }
    func fdatasync() throws(FileSystemError) {
        try fs.step("fdatasync", path)
        try base.fdatasync()
    }
    func truncate(to size: UInt64) throws(FileSystemError) {
        try fs.step("ftruncate", path)
        try base.truncate(to: size)
    }
    func size() throws(FileSystemError) -> UInt64 { try base.size() }
    func close() throws(FileSystemError) { try base.close() }
}

/// A commit gate that admits every frame under epoch 3 and, each time the committer has written a group (before its
/// fsync), reads the log's frames from LSN 1 with and without the unsynced ones.
private final class WrittenFramesProbe: LogCommitGate, @unchecked Sendable {
    // @unchecked: `reads` is guarded by `lock`.
    struct Read {
        var through: UInt64
        var durable: UInt64
        var unsynced: Log.FrameBatch
        var fsyncedOnly: Log.FrameBatch
    }
    let lock = NSLock()
    var reads: [Read] = []
    var errors: [String] = []
    weak var log: Log?

    func admit(lsn: UInt64, fence: UInt64) throws -> UInt64 { max(fence, 3) }
    func waitCommitted(_ lsn: UInt64) async throws {}
    func waitCommittedBlocking(_ lsn: UInt64) throws {}
    func framesWritten(through lsn: UInt64) {
        guard let log else { return }
        do {
            let read = Read(
                through: lsn, durable: log.durableLSN,
                unsynced: try log.frames(from: 1, maxBytes: 1 << 20, includingUnsynced: true),
                fsyncedOnly: try log.frames(from: 1, maxBytes: 1 << 20))
            lock.withLock { reads.append(read) }
        } catch {
            lock.withLock { errors.append("\(error)") }
        }
    }
}

@Suite("Log replication API: verbatim append, fencing, frames for followers, truncation")
struct LogReplicationTests {
    @Test("a follower that appends the leader's frames verbatim holds the same frames, byte for byte")
    func verbatimAppendCopiesFrames() async throws {
        let fs = InMemoryFileSystem()
        let (leader, staged) = try leaderLog(fs, count: 40)
        // Small batches: several requests, each at least one frame.
        let shipped = try allFrames(leader, maxBytes: 700)
        #expect(shipped == (try storedBytes(leader)))

        let (follower, _) = try openCollecting("/follower/p7", config(segmentSize: 900), fileSystem: fs)
        let last = try follower.appendVerbatim(shipped, leaderEpoch: 3)
        #expect(last == 40)
        try await follower.waitDurable(last)
        #expect(follower.durableLSN == 40)
        #expect(follower.highestEpoch == 3)
        #expect(try storedBytes(follower) == (try storedBytes(leader)))
        try follower.close()
        try leader.close()

        // Reopened, the follower replays the leader's frames: same LSNs, epochs, payloads.
        let (reopened, frames) = try openCollecting("/follower/p7", config(segmentSize: 900), fileSystem: fs)
        expectSame(frames, staged)
        #expect(frames.allSatisfy { $0.epoch == 3 })
        try reopened.close()
    }

    @Test("frames(from:) starts at the asked LSN, stops at the durable end, and is empty past it")
    func framesFromLSN() throws {
        let fs = InMemoryFileSystem()
        let (leader, _) = try leaderLog(fs, count: 12)
        let tail = try leader.frames(from: 9, maxBytes: 1 << 20)
        #expect(tail.firstLSN == 9 && tail.lastLSN == 12 && tail.durableLSN == 12)
        let all = try allFrames(leader)
        #expect(Array(all.suffix(tail.bytes.count)) == tail.bytes)
        let past = try leader.frames(from: 13, maxBytes: 1 << 20)
        #expect(past.bytes.isEmpty && past.lastLSN == 12)
        // A batch holds at least one frame even when it is bigger than maxBytes.
        let one = try leader.frames(from: 1, maxBytes: 1)
        #expect(one.firstLSN == 1 && one.lastLSN == 1)
        try leader.close()
    }

    @Test("frames(from:includingUnsynced:) serves frames written and not yet fsynced (a leader ships them while it syncs); the default stops at the durable end")
    func framesBeforeFsync() throws {
        let fs = InMemoryFileSystem()
        let probe = WrittenFramesProbe()
        // Small segments: groups roll into new segments, whose frames are readable before the group is published.
        let (log, _) = try openCollecting("/leader/p7", config(segmentSize: 900), fileSystem: fs)
        probe.log = log
        log.setCommitGate(probe)
        for i in 0..<60 { _ = try log.stage(type: 1, payload: compressibleBytes(120 + i, tag: i)) }
        try log.flush()
        let stored = try allFrames(log)
        #expect(probe.errors.isEmpty, "\(probe.errors)")
        #expect(!probe.reads.isEmpty)
        for read in probe.reads {
            // Called before the group's fsync: the group's frames are written, not durable.
            #expect(read.durable < read.through)
            #expect(read.unsynced.lastLSN == read.through && read.unsynced.durableLSN == read.durable)
            #expect(read.fsyncedOnly.lastLSN == read.durable)
            // The same bytes the log ends up holding durably.
            #expect(read.unsynced.bytes == Array(stored.prefix(read.unsynced.bytes.count)))
        }
        #expect(probe.reads.last?.through == 60)
        log.setCommitGate(nil)
        try log.close()
    }

    @Test("a follower fetching frame after frame is served from where its last fetch stopped, not from the segment's start")
    func consecutiveFetchesReadOn() async throws {
        let (log, _) = try tailedLeader(frames: 300)
        let stored = try allFrames(log)
        let before = log.bytesRead
        // One frame per fetch, as a follower tailing a busy leader does.
        let oneByOne = try allFrames(log, maxBytes: 1)
        #expect(oneByOne == stored)
        // Each fetch reads its frame and the next header: linear in the frames served. Rescanning every header from
        // the segment's start would read 300 × 150 headers.
        #expect(log.bytesRead - before < UInt64(3 * stored.count), "\(log.bytesRead - before) bytes read for \(stored.count) served")
        try log.close()
    }

    @Test("two followers tailing one leader, fetch after fetch, are each served from where their last fetch stopped")
    func twoTailingFollowersKeepTheirPlaces() async throws {
        let (log, _) = try tailedLeader(frames: 2000)
        // Two followers far into the segment, one frame per fetch each, taking turns (a leader's two followers do):
        // every fetch leaves a place to read on from, and 16 places are kept; when one goes, the other follower's
        // must stay.
        var next: [UInt64] = [1500, 1495]
        var served: [[UInt8]] = [[], []]
        var before: UInt64 = 0
        for turn in 0..<1002 {
            // Their first fetches walk the headers from the segment's start (no place kept yet): not counted.
            if turn == 2 { before = log.bytesRead }
            let f = turn % 2
            let batch = try log.frames(from: next[f], maxBytes: 1, reader: f == 0 ? "a" : "b")
            try #require(batch.lastLSN == next[f])
            if turn >= 2 { served[f] += batch.bytes }
            next[f] += 1
        }
        let read = log.bytesRead - before
        let stored = try allFrames(log, from: 1501)
        let behind = try log.frames(from: 1496, maxBytes: 1 << 20)
        let lagging = Array(behind.bytes[..<behind.frames.first { $0.lsn == 1996 }!.range.lowerBound])
        #expect(served[0] == stored && served[1] == lagging)
        // Linear in the frames served: starting over from the segment's start even once in a while would read
        // 1,500 headers each time.
        #expect(read < UInt64(3 * (stored.count + lagging.count)), "\(read) bytes read for \(stored.count + lagging.count) served")
        try log.close()
    }

    @Test("a follower far behind keeps its place however often the followers ahead of it fetch, and two followers at one LSN both read on")
    func farBehindFollowerKeepsItsPlace() async throws {
        let (log, _) = try tailedLeader(frames: 2000)
        // Two followers near the end fetch 40 times (one frame each) between each fetch of a third, 1,000 frames
        // behind them — more fetches than a table of places keyed by LSN kept. A third reader, "twin", fetches the
        // same LSNs as "a", right after it.
        var next: [String: UInt64] = ["a": 1500, "b": 1495, "twin": 1500, "far": 500]
        var served: [String: [UInt8]] = [:]
        var before: UInt64 = 0
        func fetch(_ reader: String, counted: Bool) throws {
            let batch = try log.frames(from: next[reader]!, maxBytes: 1, reader: reader)
            try #require(batch.lastLSN == next[reader]!)
            if counted { served[reader, default: []] += batch.bytes }
            next[reader]! += 1
        }
        // The first fetch of each walks its segment's headers from the start (no place kept yet): not counted.
        for reader in ["a", "b", "twin", "far"] { try fetch(reader, counted: false) }
        before = log.bytesRead
        for _ in 0..<25 {
            for _ in 0..<20 {
                try fetch("a", counted: true)
                try fetch("twin", counted: true)
                try fetch("b", counted: true)
            }
            try fetch("far", counted: true)
        }
        let read = log.bytesRead - before
        let farFrames = try log.frames(from: 501, maxBytes: 1 << 20)
        let expectedFar = Array(farFrames.bytes[..<farFrames.frames.first { $0.lsn == 526 }!.range.lowerBound])
        #expect(served["far"] == expectedFar && served["a"] == served["twin"])
        let total = served.values.reduce(0) { $0 + $1.count }
        // Linear in the frames served: losing the far follower's place would walk 500 headers on each of its 25
        // fetches, and the twin's (a table keyed by LSN that takes a place out when it is used) 1,500 on each of its.
        #expect(read < UInt64(3 * total), "\(read) bytes read for \(total) served")
        try log.close()
    }

    @Test("a fetch that matches no reader's place reads on from the recently written run at or before its LSN, not from the segment's start")
    func fetchWithoutPlaceStartsAtARecentRun() async throws {
        let fs = InMemoryFileSystem()
        var c = config(segmentSize: 1 << 20)
        c.epoch = 3
        let (log, _) = try openCollecting("/leader/p7", c, fileSystem: fs)
        // 200 groups of 10 frames (LSNs 1, 11, 21, … start the committer's runs), all in one segment.
        for group in 0..<200 {
            for i in 0..<10 { _ = try log.stage(type: 1, payload: compressibleBytes(100, tag: group * 10 + i)) }
            try log.flush()
        }
        let stored = try log.frames(from: 1, maxBytes: 1 << 20)
        try #require(stored.lastLSN == 2000 && log.segments().count == 1)
        let frameSize = stored.bytes.count / 2000
        // Fresh readers (a follower's first fetch, a re-fetch after a lost answer): a run's first LSN, and an LSN
        // inside a run, far into the segment.
        for (reader, lsn) in [("a", UInt64(1501)), ("b", 1507), ("c", 1991), ("d", 1000)] {
            let before = log.bytesRead
            let batch = try log.frames(from: lsn, maxBytes: 1, reader: reader)
            let read = log.bytesRead - before
            let frame = stored.frames.first { $0.lsn == lsn }!
            #expect(batch.firstLSN == lsn && batch.lastLSN == lsn && batch.bytes == Array(stored.bytes[frame.range]))
            // Walking every header from the segment's start would read ~1,000–2,000 headers.
            #expect(read < UInt64(12 * frameSize), "LSN \(lsn): \(read) bytes read, frames of ~\(frameSize) bytes")
        }
        try log.close()
    }

    @Test("frames(from:through:) stops after `through`, and the reader's next fetch from there reads on from its kept place")
    func batchStopsAtThrough() async throws {
        let (log, fs) = try tailedLeader(frames: 50)
        // A leader decided to serve through LSN 30; 20 more frames were written before it read.
        let first = try log.frames(from: 1, through: 30, maxBytes: 1 << 20, reader: "a")
        #expect(first.firstLSN == 1 && first.lastLSN == 30 && first.frames.map(\.lsn) == Array(1...30))
        let all = try log.frames(from: 1, maxBytes: 1 << 20)
        #expect(first.bytes == Array(all.bytes[..<all.frames[30].range.lowerBound]))
        // The follower's next fetch starts at 31: one read from the kept place, frames 31…50.
        let reads = fs.readCalls
        let next = try log.frames(from: 31, maxBytes: 1 << 20, reader: "a")
        #expect(next.firstLSN == 31 && next.lastLSN == 50)
        #expect(fs.readCalls - reads == 1, "\(fs.readCalls - reads) reads")
        #expect(try log.frames(from: 51, through: 50, maxBytes: 1 << 20, reader: "a").frames.isEmpty)
        try log.close()
    }

    @Test("frames(from:) reads a tailing follower's batch in one go and names each frame of it as checked")
    func batchReadsOnceAndListsItsFrames() async throws {
        let (log, fs) = try tailedLeader(frames: 50)
        let first = try log.frames(from: 1, maxBytes: 1 << 20)
        #expect(first.lastLSN == 50)
        #expect(first.frames.map(\.lsn) == Array(1...50))
        #expect(first.frames.allSatisfy { $0.epoch == 3 })
        #expect(first.frames.map(\.range.count).reduce(0, +) == first.bytes.count)
        #expect(try Log.splitVerbatim(first.bytes, partition: 7).map(\.range) == first.frames.map(\.range))
        for i in 50..<80 { _ = try log.stage(type: 1, payload: compressibleBytes(100, tag: i)) }
        try log.flush()
        let reads = fs.readCalls
        let tail = try log.frames(from: 51, maxBytes: 1 << 20)
        #expect(tail.lastLSN == 80)
        // One positioned read for the 30 new frames (not one per header and one per frame).
        #expect(fs.readCalls - reads == 1, "\(fs.readCalls - reads) reads")
        try log.close()
    }

    @Test("a frame with a bad checksum is refused and nothing of its batch is appended")
    func badChecksumRefused() throws {
        let fs = InMemoryFileSystem()
        let (leader, _) = try leaderLog(fs, count: 5)
        var bytes = try allFrames(leader)
        bytes[bytes.count - 3] ^= 0x40  // in the last frame's payload
        let (follower, _) = try openCollecting("/f/p7", config(), fileSystem: fs)
        let error = #expect(throws: CloudletError.self) { try follower.appendVerbatim(bytes, leaderEpoch: 3) }
        #expect(error?.code == .corruption)
        #expect(follower.lastLSN == 0)
        // A batch cut mid-frame is refused too.
        let clean = try allFrames(leader)
        #expect(throws: CloudletError.self) { try follower.appendVerbatim(Array(clean.dropLast(1)), leaderEpoch: 3) }
        #expect(follower.lastLSN == 0)
        try follower.close()
        try leader.close()
    }

    @Test("a gap in LSNs, or a frame already held, is refused")
    func lsnGapRefused() throws {
        let fs = InMemoryFileSystem()
        let (leader, _) = try leaderLog(fs, count: 6)
        let (follower, _) = try openCollecting("/f/p7", config(), fileSystem: fs)
        let gap = try #require(throws: CloudletError.self) { try follower.appendVerbatim(try leader.frames(from: 2, maxBytes: 1 << 20).bytes, leaderEpoch: 3) }
        #expect(gap.code == .invalidArguments)
        #expect(gap.message.contains("LSNs 1…1 are missing"))
        try follower.appendVerbatim(try leader.frames(from: 1, maxBytes: 1).bytes, leaderEpoch: 3)
        let again = try #require(throws: CloudletError.self) { try follower.appendVerbatim(try leader.frames(from: 1, maxBytes: 1).bytes, leaderEpoch: 3) }
        #expect(again.message.contains("already held"))
        #expect(follower.lastLSN == 1)
        try follower.flush()
        try follower.close()
        try leader.close()
    }

    @Test("fencing: a deposed leader's frames are refused, epochs never go back along the log, and a fenced leader cannot stage")
    func fencing() throws {
        let fs = InMemoryFileSystem()
        let (old, _) = try leaderLog(fs, count: 3, epoch: 2, directory: "/old/p7")
        let (follower, _) = try openCollecting("/f/p7", config(), fileSystem: fs)
        follower.fence(epoch: 5)
        let fenced = try #require(throws: CloudletError.self) { try follower.appendVerbatim(try allFrames(old), leaderEpoch: 2) }
        #expect(fenced.code == .serviceUnavailable)
        #expect(fenced.message.contains("fenced"))
        #expect(follower.lastLSN == 0)
        // The leader of epoch 5 ships the same old frames (epoch 2) it carries: accepted.
        try follower.appendVerbatim(try allFrames(old), leaderEpoch: 5)
        #expect(follower.lastLSN == 3 && follower.highestEpoch == 5)
        // A leader never ships frames of an epoch after its own.
        let (future, _) = try leaderLog(fs, count: 4, epoch: 6, directory: "/future/p7")
        let newer = try #require(throws: CloudletError.self) {
            try follower.appendVerbatim(try future.frames(from: 4, maxBytes: 1 << 20).bytes, leaderEpoch: 5)
        }
        #expect(newer.message.contains("newer than its leader's 5"))
        try follower.appendVerbatim(try future.frames(from: 4, maxBytes: 1 << 20).bytes, leaderEpoch: 6)
        // Epochs never go back along the log: after a frame of epoch 6, one of epoch 4 is refused.
        let (older, _) = try leaderLog(fs, count: 5, epoch: 4, directory: "/older/p7")
        let back = try #require(throws: CloudletError.self) {
            try follower.appendVerbatim(try older.frames(from: 5, maxBytes: 1 << 20).bytes, leaderEpoch: 7)
        }
        #expect(back.message.contains("older than the 6 of the frame before it"))
        #expect(follower.lastLSN == 4)

        // The old leader, having seen epoch 6, can no longer stage under epoch 2, nor lead in epoch 5.
        old.fence(epoch: 6)
        let stale = try #require(throws: CloudletError.self) { try old.stage(type: 1, payload: [1]) }
        #expect(stale.code == .serviceUnavailable)
        #expect(throws: CloudletError.self) { try old.lead(epoch: 5) }
        try old.lead(epoch: 8)
        let (_, position) = try old.stage(type: 1, payload: [1])
        try old.flush()
        #expect(try old.readFrame(at: position).epoch == 8)
        try follower.flush()
        for log in [old, follower, future, older] { try log.close() }
    }

    @Test("truncating after an LSN inside a segment, at a segment boundary, at 0 or past the end", arguments: [0, 1, 9, 17, 29, 30, 35] as [UInt64])
    func truncateKeepsPrefix(lsn: UInt64) throws {
        let fs = InMemoryFileSystem()
        let (leader, staged) = try leaderLog(fs, count: 30)
        let boundaries = leader.segments().map(\.firstLSN)
        try leader.close()
        let result = try Log.truncate(directory: "/leader/p7", partition: 7, after: lsn, fileSystem: fs)
        #expect(result.previousLastLSN == 30)
        #expect(result.lastLSN == min(lsn, 30))
        #expect(result.removedSegments.count == boundaries.filter { $0 > lsn }.count)
        var c = config(segmentSize: 900)
        c.epoch = 3
        let (reopened, frames) = try openCollecting("/leader/p7", c, fileSystem: fs)
        expectSame(frames, staged.prefix(Int(min(lsn, 30))))
        // Writing goes on right after the cut.
        let (next, _) = try reopened.stage(type: 1, payload: [9])
        #expect(next == min(lsn, 30) + 1)
        try reopened.flush()
        try reopened.close()
    }

    @Test("a crash at any step of a truncation leaves a prefix holding every kept frame; running it again finishes")
    func truncateIsCrashSafe() throws {
        var budget = 0
        while true {
            let memory = InMemoryFileSystem()
            let (leader, staged) = try leaderLog(memory, count: 30)
            try leader.close()
            let limited = StepLimitedFileSystem(memory, budget: budget)
            let finished = (try? Log.truncate(directory: "/leader/p7", partition: 7, after: 11, fileSystem: limited)) != nil
            memory.crash()
            let (log, frames) = try openCollecting("/leader/p7", config(segmentSize: 900), fileSystem: memory)
            try log.close()
            #expect(frames.count >= 11, "budget \(budget)")
            expectSame(frames, staged.prefix(frames.count))
            if finished { #expect(frames.count == 11, "budget \(budget)") }
            _ = try Log.truncate(directory: "/leader/p7", partition: 7, after: 11, fileSystem: memory)
            let (again, kept) = try openCollecting("/leader/p7", config(segmentSize: 900), fileSystem: memory)
            try again.close()
            expectSame(kept, staged.prefix(11))
            if finished { break }
            budget += 1
            try #require(budget < 100)
        }
        // Removing two segments and cutting one, each made durable: at least four steps.
        #expect(budget >= 4)
    }

    @Test("a deposed leader truncates its divergent suffix, takes the new leader's frames and ends byte-for-byte equal")
    func deposedLeaderRejoins() async throws {
        let fs = InMemoryFileSystem()
        // Both held 1…20 of epoch 3; the old leader then wrote 21…26 alone (never acknowledged under quorum).
        let (old, _) = try leaderLog(fs, count: 26, directory: "/old/p7")
        let (new, _) = try openCollecting("/new/p7", config(segmentSize: 900), fileSystem: fs)
        var shared: [UInt8] = []
        var next: UInt64 = 1
        while next <= 20 {
            let batch = try old.frames(from: next, maxBytes: 1)
            shared += batch.bytes
            next = batch.lastLSN + 1
        }
        try new.appendVerbatim(shared, leaderEpoch: 3)
        try new.flush()
        // The new leader takes over in epoch 9 and writes 21…24.
        try new.lead(epoch: 9)
        for i in 0..<4 { _ = try new.stage(type: 1, payload: compressibleBytes(400, tag: 100 + i)) }
        try new.flush()
        try old.close()

        // The old leader comes back: the new leader started its epoch at 21, so it keeps 1…20 and re-tails.
        let cut = try Log.truncate(directory: "/old/p7", partition: 7, after: 20, fileSystem: fs)
        #expect(cut.previousLastLSN == 26 && cut.lastLSN == 20)
        var c = config(segmentSize: 900)
        c.epoch = 3
        let (rejoined, _) = try openCollecting("/old/p7", c, fileSystem: fs)
        rejoined.fence(epoch: 9)
        try rejoined.appendVerbatim(try new.frames(from: 21, maxBytes: 1 << 20).bytes, leaderEpoch: 9)
        try await rejoined.waitDurable(24)
        #expect(try storedBytes(rejoined) == (try storedBytes(new)))
        #expect(rejoined.highestEpoch == 9)
        try rejoined.close()
        try new.close()
    }

    @Test("frames appended verbatim survive a crash like staged ones: a prefix holding every frame that was durable",
          arguments: [1, 2, 3, 4] as [UInt64])
    func verbatimAppendSurvivesCrash(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let fs = InMemoryFileSystem()
        let (leader, staged) = try leaderLog(fs, count: 40, seed: seed)
        let (follower, _) = try openCollecting("/f/p7", config(segmentSize: 900), fileSystem: fs)
        var durable: UInt64 = 0
        var next: UInt64 = 1
        while next <= 40 {
            let batch = try leader.frames(from: next, maxBytes: Int.random(in: 100...2_000, using: &rng))
            try follower.appendVerbatim(batch.bytes, leaderEpoch: 3)
            if Bool.random(using: &rng) {
                try await follower.waitDurable(batch.lastLSN)
                durable = batch.lastLSN
            }
            next = batch.lastLSN + 1
        }
        let keepSeed = rng.next()
        fs.crash { path, unsynced in Int(truncatingIfNeeded: (keepSeed ^ UInt64(path.utf8.count)) % UInt64(unsynced + 1)) }
        try? follower.close()
        try? leader.close()
        let (reopened, frames) = try openCollecting("/f/p7", config(segmentSize: 900), fileSystem: fs)
        #expect(frames.count >= Int(durable), "seed \(seed): \(durable) were durable, \(frames.count) survived")
        expectSame(frames, staged.prefix(frames.count))
        try reopened.close()
    }

    @Test("a compacted prefix is neither served to followers nor truncated into; what follows it is served")
    func compactedPrefix() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, config(segmentSize: 900))
            try stageAll(log, (0..<30).map { [UInt8](repeating: UInt8($0), count: 100 + $0) })
            try log.installCompaction(try LogCompactionTests.compact(log) { _ in true })
            let covered = try #require(log.compactionMarker).coveredThrough
            let refused = try #require(throws: CloudletError.self) { try log.frames(from: 1, maxBytes: 1 << 20) }
            #expect(refused.code == .changeTokenExpired)
            let tail = try log.frames(from: covered + 1, maxBytes: 1 << 20)
            #expect(tail.firstLSN == covered + 1 && tail.lastLSN == 30)
            try log.close()
            let cut = try #require(throws: CloudletError.self) { try Log.truncate(directory: dir, partition: 7, after: 1) }
            #expect(cut.code == .invalidArguments)
        }
    }
}
