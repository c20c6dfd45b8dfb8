#if canImport(Glibc)
import Glibc
#endif
import CloudletCore

/// The group commit of one ``Log``, run on its own thread: takes everything staged, writes it (creating new
/// segments as the staged frames roll into them), calls fdatasync once for the whole group, publishes the new
/// durable LSN and wakes every waiter it covers. The first failed write or fdatasync is fatal and never retried.
///
/// `@unchecked Sendable`: `current` and `currentSegment` are touched only by the committer thread while it runs,
/// and by ``Log/close()`` after joining that thread; everything shared lives in `monitor`.
final class Committer: @unchecked Sendable {
    let monitor: Monitor<LogState>
    let fileSystem: any FileSystem
    let directory: String
    let partition: UInt32
    let configuration: LogConfiguration
    /// The segment file being appended to.
    private(set) var current: any File
    private(set) var currentSegment: UInt64

    /// Buffers bigger than this are freed after a group instead of being kept for reuse.
    static let maxSpareCapacity = 4 << 20

    init(
        monitor: Monitor<LogState>, fileSystem: any FileSystem, directory: String, partition: UInt32,
        configuration: LogConfiguration, current: any File, currentSegment: UInt64
    ) {
        self.monitor = monitor
        self.fileSystem = fileSystem
        self.directory = directory
        self.partition = partition
        self.configuration = configuration
        self.current = current
        self.currentSegment = currentSegment
    }

    private struct Group {
        var bytes: [UInt8]
        var chunks: [LogState.Chunk]
    }

    /// The thread's body: returns when the log closes (after writing everything staged) or fails.
    func run() {
        while true {
            let taken = monitor.withLock(
                waitingOn: .work, until: { !$0.chunks.isEmpty || $0.closing || $0.failure != nil }
            ) { s -> Group? in
                guard s.failure == nil, !s.chunks.isEmpty else { return nil }
                let group = Group(bytes: s.pending, chunks: s.chunks)
                s.pending = s.spare
                s.spare = []
                s.chunks = []
                s.inflightBytes = group.bytes.count
                return group
            }
            guard let group = taken else { return }
            do throws(FileSystemError) {
                try write(group)
            } catch {
                fail(error)
                return
            }
        }
    }

    private func write(_ group: Group) throws(FileSystemError) {
        var fsyncs = 0
        var written = 0
        for chunk in group.chunks {
            if chunk.createsSegment {
                // Seal the old segment before the new one exists, so that a crash can never leave a later segment
                // behind a torn one.
                try current.fdatasync()
                fsyncs += 1
                let header = SegmentHeader(partition: partition, firstLSN: chunk.segment, epoch: chunk.epoch)
                let file = try header.createFile(in: directory, fileSystem: fileSystem)
                fsyncs += 1
                written += SegmentHeader.size
                let sealed = currentSegment
                monitor.withLock { s in
                    if let i = s.segmentIndex(sealed) { s.segments[i].sealed = true }
                    s.segments.append(
                        LogState.Segment(
                            firstLSN: chunk.segment, lastLSN: chunk.segment - 1, size: UInt64(SegmentHeader.size),
                            sealed: false, path: Path.join(directory, SegmentHeader.fileName(firstLSN: chunk.segment))))
                    s.files[chunk.segment] = file
                }
                current = file
                currentSegment = chunk.segment
            }
            try current.write(group.bytes[chunk.start..<(chunk.start + chunk.count)], at: chunk.fileOffset)
            written += chunk.count
        }
        announceWritten(group)
        if configuration.durability == .fsync {
            try current.fdatasync()
            fsyncs += 1
        }
        publish(group, fsyncs: fsyncs, written: written)
    }

    /// Records the group's frames as written (readable from the files, not yet fsynced) and tells the commit gate,
    /// before the group's fdatasync: a replicated leader ships them to its followers while it syncs them itself.
    private func announceWritten(_ group: borrowing Group) {
        let chunks = group.chunks
        let gate = monitor.withLock { s -> (any LogCommitGate)? in
            s.noteStarts(of: chunks, after: max(s.writtenLSN, s.durableLSN))
            for chunk in chunks {
                s.written[chunk.segment] = (chunk.lastLSN, chunk.fileOffset + UInt64(chunk.count))
            }
            s.writtenLSN = chunks.last!.lastLSN
            return s.gate
        }
        gate?.framesWritten(through: chunks.last!.lastLSN)
    }

    /// Makes the group's frames durable in the state and wakes whoever waited for them.
    private func publish(_ group: consuming Group, fsyncs: Int, written: Int) {
        var buffer = group.bytes
        let chunks = group.chunks
        let (ready, durable, handler) = monitor.withLock { s -> ([LogState.Waiter], UInt64, (@Sendable (UInt64) -> Void)?) in
            for chunk in chunks {
                guard let i = s.segmentIndex(chunk.segment) else { continue }
                s.segments[i].lastLSN = chunk.lastLSN
                s.segments[i].size = chunk.fileOffset + UInt64(chunk.count)
            }
            let durable = chunks.last!.lastLSN
            s.durableLSN = durable
            s.written = [:]
            s.inflightBytes = 0
            s.stats.groups += 1
            s.stats.fsyncs += fsyncs
            s.stats.bytesWritten += written
            if s.spare.isEmpty && buffer.capacity <= Self.maxSpareCapacity {
                buffer.removeAll(keepingCapacity: true)
                s.spare = buffer
            }
            let ready = s.waiters.filter { $0.lsn <= durable }
            s.waiters.removeAll { $0.lsn <= durable }
            return (ready, durable, s.gate == nil ? s.durableHandler : nil)
        }
        monitor.broadcast(.progress)
        for waiter in ready { waiter.resume(.success(())) }
        handler?(durable)
    }

    /// Records the fatal error: the log goes read-only and every waiter, now and later, gets it. A full disk
    /// (`ENOSPC`, `EDQUOT`) is `.quotaExceeded`, any other failure `.readOnly`; both name the call, file and errno.
    func fail(_ error: FileSystemError) {
        let full = error.errno == ENOSPC || error.errno == EDQUOT
        let failure = CloudletError(
            full ? .quotaExceeded : .readOnly,
            "partition \(partition) is read-only after a failed \(error.operation) on \(error.path): \(error.errnoText) "
                + "(errno \(error.errno))" + (full ? "; free space on the disk, then reopen the store" : ""),
            cause: error)
        fail(failure)
    }

    /// Records `failure` as the log's fatal error (see ``fail(_:)-(FileSystemError)``).
    func fail(_ failure: CloudletError) {
        // Waiters get the first failure, which may be an earlier one than this.
        let (first, waiters, handler) = monitor.withLock {
            s -> (CloudletError, [LogState.Waiter], (@Sendable (CloudletError) -> Void)?) in
            let handler = s.fail(failure)
            s.pending = []
            s.chunks = []
            s.inflightBytes = 0
            // Written but never synced: not served to anyone from now on.
            s.written = [:]
            s.writtenLSN = s.durableLSN
            let waiters = s.waiters
            s.waiters = []
            return (s.failure!, waiters, handler)
        }
        monitor.broadcast(.progress)
        for waiter in waiters { waiter.resume(.failure(first)) }
        handler?(failure)
    }

    /// The final sync of ``Log/close()``, also under `.os` durability; call only after the thread was joined.
    func syncOnClose() throws(FileSystemError) {
        try current.fdatasync()
        try fileSystem.fsyncDirectory(directory)
    }
}
