#if canImport(Glibc)
import Glibc
#endif
import CloudletConcurrency
import CloudletCore
import CloudletStorage
import Foundation
import Synchronization

/// The asset files of a store: `assets/sha256/<first two hex digits>/<64 hex digits>`, each named by the SHA-256 of
/// its bytes (content addressing: the same bytes stored twice take the space once). Layout and rules:
/// `docs/assets.md`.
///
/// A blob is written to `assets/tmp/` while it is hashed, fdatasync'd (outside the lock), then renamed to its name:
/// a blob under its name is always whole. Its *name* becomes durable when its shard directory is fsync'd — at once
/// by default, or, for a write with `syncName: false` (an upload), by ``makeDurable(_:)``, which every save calls
/// for the blobs it references before it commits. So a record that commits never references a blob a crash can
/// lose, and an upload pays one sync, not two; an upload no save has referenced yet may be lost to a power failure
/// (its receipt then names a file the store no longer has, and the save fails asking for the upload again).
/// Temporary files left by a crash are removed when the store opens (only one process writes a store).
///
/// **Lifetime.** ``sweep(referenced:cutoff:)`` deletes blobs that no live record references. It never deletes a
/// blob an acknowledged record references, even while records are being saved and the same bytes uploaded:
/// - a save *pins* its blobs (``pin(_:)``) from before it checks they exist until its commit is durable; a pinned
///   blob, or one pinned at any time since the sweep began, is kept;
/// - a sweep takes its set of referenced blobs after it began, so a save unpinned before then is in it;
/// - a blob written or found again by an upload gets a fresh modification time, and a sweep keeps blobs modified
///   after `cutoff` (the receipt grace window), so an upload's receipt can be used while it is valid;
/// - checking a blob's existence, writing or touching it, and deleting it happen under one lock.
package final class BlobStore: Sendable {
    /// `<store>/assets`.
    package let directory: String
    let fileSystem: any FileSystem
    let readOnly: Bool
    private let state = Mutex(PinState())
    /// Held by a collection from start to end (``collect(referenced:cutoff:)``).
    private let sweeper = NSLock()
    private let counter = Atomic<Int>(0)
    /// Whether ``prepareDirectories()`` has run in this process (held while it runs).
    private let prepared = Mutex(false)

    private struct PinState {
        /// checksum → saves in flight holding it.
        var pins: [String: Int] = [:]
        /// While a sweep runs: every blob pinned or written since it began.
        var touched: Set<String>?
        /// Blobs renamed to their name since their shard directory was last fsync'd (``makeDurable(_:)``).
        var unsynced: Set<String> = []
    }

    /// A blob as stored: its checksum and size.
    package struct StoredBlob: Sendable, Hashable {
        package var checksum: String
        package var size: Int64
    }

    /// A blob over ``write(maxSize:read:)``'s limit; nothing was kept.
    package struct TooLarge: Error, Sendable {
        package var limit: Int64
    }

    package static let chunkSize = 256 << 10

    package init(directory: String, fileSystem: any FileSystem, readOnly: Bool) throws {
        self.directory = directory
        self.fileSystem = fileSystem
        self.readOnly = readOnly
        // Partial writes of a crashed process (the store lock makes this process the only writer). The directories
        // are made by the first write: a store without assets has none.
        guard !readOnly, fileSystem.fileExists(directory + "/tmp") else { return }
        try io { () throws(FileSystemError) in
            for name in try fileSystem.listDirectory(directory + "/tmp") { try fileSystem.remove(directory + "/tmp/" + name) }
            // Names an earlier process renamed into place but never synced (it was killed before a save referenced
            // them) are still only in the kernel's cache: sync them now, since ``makeDurable(_:)`` does not know them.
            // An empty shard (they are all made at once, ``prepareDirectories()``) has no name to sync.
            let root = directory + "/sha256"
            if fileSystem.fileExists(root) {
                for shard in try fileSystem.listDirectory(root) where !(try fileSystem.listDirectory(root + "/" + shard)).isEmpty {
                    try fileSystem.fsyncDirectory(root + "/" + shard)
                }
            }
        }
    }

    /// Makes `tmp/` and all 256 shard directories (`sha256/00` … `sha256/ff`) that are missing, once per process,
    /// before the first write (the server calls it when it starts); their names are durable when it returns.
    /// Before, each write into a shard not yet there made it and fsync'd `sha256/` then and there: a second sync for
    /// most of a new store's first few hundred uploads (docs/assets.md, *Speed*). Nothing on a read-only store.
    package func prepareDirectories() throws {
        try prepared.withLock { done in
            guard !done, !readOnly else { return }
            try io { () throws(FileSystemError) in
                let root = directory + "/sha256"
                let existed = fileSystem.fileExists(root)
                try fileSystem.createDirectory(directory + "/tmp")
                try fileSystem.createDirectory(root)
                let present = Set(try fileSystem.listDirectory(root))
                let hex = Array("0123456789abcdef")
                var made = false
                for a in hex {
                    for b in hex where !present.contains("\(a)\(b)") {
                        try fileSystem.createDirectory("\(root)/\(a)\(b)")
                        made = true
                    }
                }
                if made { try fileSystem.fsyncDirectory(root) }
                if !existed {
                    // `assets/` (with `tmp/` and `sha256/`) and its entry in the store's directory.
                    try fileSystem.fsyncDirectory(directory)
                    try fileSystem.fsyncDirectory(Path.parent(directory))
                }
            }
            done = true
        }
    }

    /// Whether `s` has the shape of a checksum (64 lowercase hex digits): anything else never names a blob.
    package static func isChecksum(_ s: String) -> Bool {
        s.utf8.count == 64 && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// The path of the blob `checksum` (which must be well formed).
    package func path(of checksum: String) -> String {
        precondition(Self.isChecksum(checksum), "not a checksum: \(checksum)")
        return "\(directory)/sha256/\(checksum.prefix(2))/\(checksum)"
    }

    package func exists(_ checksum: String) -> Bool {
        Self.isChecksum(checksum) && fileSystem.fileExists(path(of: checksum))
    }

    /// Opens the blob for reading. - Throws: `unknownItem` when there is none.
    package func open(_ checksum: String) throws -> any File {
        guard Self.isChecksum(checksum) else { throw CloudletError(.unknownItem, "'\(checksum)' is not an asset checksum") }
        do { return try fileSystem.open(path(of: checksum), options: .readOnly) } catch {
            if error.errno == ENOENT { throw CloudletError(.unknownItem, "asset \(checksum) is not in the store") }
            throw CloudletError.io(error, "opening asset \(checksum)")
        }
    }

    /// The whole blob.
    package func read(_ checksum: String) throws -> [UInt8] {
        let file = try open(checksum)
        defer { try? file.close() }
        return try io { () throws(FileSystemError) in try file.read(at: 0, count: Int(try file.size())) }
    }

    // MARK: - Writing

    /// Writes a blob from `read`, which fills the buffer it is given and returns how many bytes it put there (0 at
    /// the end): streamed to a temporary file and hashed on the way, never held whole. Over `maxSize` bytes it
    /// stops, removes what it wrote and throws ``TooLarge``. With `pin`, the blob is pinned (``pin(_:)``) as it
    /// gets its name, so that no sweep can take it before the save that wrote it commits: unpin it after. With
    /// `syncName: false` its name is left for ``makeDurable(_:)`` to sync (the file's bytes are synced either way).
    package func write(
        maxSize: Int64? = nil, pin: Bool = false, syncName: Bool = true, read: (UnsafeMutableRawBufferPointer) throws -> Int
    ) throws -> StoredBlob {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        return try write(maxSize: maxSize, pin: pin, syncName: syncName) {
            let n = try read(buffer)
            return UnsafeRawBufferPointer(rebasing: buffer[0..<max(n, 0)])
        }
    }

    /// Bytes written to a blob's temporary file after which their writeback is started
    /// (``File/startWriteback(at:count:)``, on the writer's thread, beside the hashing), so that the disk writes a
    /// file while the rest arrives rather than all of it in the final `fdatasync`: one piece (an upload's pieces are
    /// 256–512 KiB), so that even a 1 MB file's sync has only its last piece left (docs/assets.md, *Speed*; it was
    /// 8 MiB while the hashing thread paid for the call).
    package static let writebackWindow = 256 << 10

    /// ``write(maxSize:pin:syncName:read:)`` from `next`, which returns the next piece of the blob (valid until it is
    /// called again; empty at the end): for a source that has its bytes in a buffer already (an upload's body, taken
    /// from the HTTP front end without a copy). `ended` tells, after a piece, whether it was the last (when the source
    /// knows its length): then the file's `fdatasync` starts at once, beside the hashing of that piece.
    ///
    /// Each piece is hashed on the calling thread while another thread (``FileWriter``) writes it to the file: SHA-256
    /// and the copy into the page cache overlap instead of taking turns (docs/assets.md, *Speed*). The name is given
    /// only once both the `fdatasync` and the hash are done, so the durability protocol is the same.
    package func write(
        maxSize: Int64? = nil, pin: Bool = false, syncName: Bool = true, ended: () -> Bool = { false },
        next: () throws -> UnsafeRawBufferPointer
    ) throws -> StoredBlob {
        guard !readOnly else { throw CloudletError(.readOnly, "the store at \(Path.parent(directory)) is open read-only") }
        let temp = try temporaryPath()
        let writer = FileWriter(creating: temp, on: fileSystem)  // created while the first piece comes
        var kept = false
        defer {
            if !kept {
                try? writer.close()  // nothing may still use the file (or a piece) once this returns
                try? fileSystem.remove(temp)
            }
        }
        let hash = SHA256Stream()
        var size: Int64 = 0
        var synced = false
        while true {
            let chunk = try next()
            if chunk.isEmpty { break }
            if let maxSize, size + Int64(chunk.count) > maxSize { throw TooLarge(limit: maxSize) }
            synced = ended()
            writer.write(chunk, at: UInt64(size), sync: synced)
            hash.update(chunk)
            size += Int64(chunk.count)
            try io { () throws(FileSystemError) in try writer.wait() }  // the piece is the source's again after this
        }
        if !synced { writer.sync() }
        try io { () throws(FileSystemError) in try writer.close() }
        let checksum = hash.finishHex()
        try place(temp, as: checksum, pin: pin)
        kept = true
        if syncName { try makeDurable([checksum]) }
        return StoredBlob(checksum: checksum, size: size)
    }

    /// A new name under `tmp/` for a write in progress (the directories made first: ``prepareDirectories()``).
    /// Whatever is left there when the store opens is removed.
    package func temporaryPath() throws -> String {
        try prepareDirectories()
        return "\(directory)/tmp/\(getpid())-\(counter.add(1, ordering: .relaxed).newValue)-\(UInt32.random(in: 0...UInt32.max)).part"
    }

    /// Gives the file at `temp` (a ``temporaryPath()`` another writer filled: a replica's copy fetched from a peer)
    /// the name `checksum` — if it is exactly `size` bytes that hash to `checksum`; otherwise it is removed and
    /// `.corruption` thrown. Its bytes and its name are durable when this returns (`fdatasync`, rename, shard
    /// directory fsync, as for ``write(maxSize:pin:syncName:read:)``); the temporary file never stays behind.
    package func adopt(_ temp: String, checksum: String, size: Int64) throws {
        guard !readOnly else { throw CloudletError(.readOnly, "the store at \(Path.parent(directory)) is open read-only") }
        guard Self.isChecksum(checksum) else { throw CloudletError.invalid("'\(checksum)' is not an asset checksum") }
        var kept = false
        defer { if !kept { try? fileSystem.remove(temp) } }
        let file = try io { () throws(FileSystemError) in try fileSystem.open(temp, options: []) }
        defer { try? file.close() }
        let (length, actual) = try Self.contentHash(file)
        guard length == size, actual == checksum else {
            throw CloudletError.corruption(
                "asset \(checksum): the copy received has \(length) bytes hashing to \(actual), not \(size) bytes hashing to its name")
        }
        try io { () throws(FileSystemError) in try file.fdatasync() }
        try place(temp, as: checksum, pin: false)
        kept = true
        try makeDurable([checksum])
    }

    /// Copies the file at `source` into the store (pinned with `pin`, as ``write(maxSize:pin:syncName:read:)``).
    package func importFile(_ source: String, pin: Bool = false, syncName: Bool = true) throws -> StoredBlob {
        let file: any File
        do { file = try fileSystem.open(source, options: .readOnly) } catch {
            throw CloudletError(
                error.errno == ENOENT ? .invalidArguments : .io, "cannot read asset file \(source): \(error.errnoText)")
        }
        defer { try? file.close() }
        var offset: UInt64 = 0
        return try write(pin: pin, syncName: syncName) { buffer in
            let n = try io { () throws(FileSystemError) in try file.pread(into: buffer, at: offset) }
            offset += UInt64(n)
            return n
        }
    }

    /// Stores `bytes` (pinned with `pin`, as ``write(maxSize:pin:syncName:read:)``).
    package func importBytes(_ bytes: [UInt8], pin: Bool = false, syncName: Bool = true) throws -> StoredBlob {
        var offset = 0
        return try bytes.withUnsafeBytes { all in
            try write(pin: pin, syncName: syncName) { buffer in
                let n = min(buffer.count, all.count - offset)
                if n > 0 { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: all[offset..<offset + n])) }
                offset += n
                return n
            }
        }
    }

    /// Moves a synced temporary file to its name, or drops it when the blob is there already (then the blob's
    /// modification time is refreshed, as a new one's would be: see the lifetime rules above). Under the lock, so
    /// that a sweep never deletes the name in between. The new name is durable only after ``makeDurable(_:)``.
    private func place(_ temp: String, as checksum: String, pin: Bool) throws {
        let final = path(of: checksum)
        let shard = Path.parent(final)
        try state.withLock { st in
            if pin { st.pins[checksum, default: 0] += 1 }
            if keep(checksum, &st) {
                try? fileSystem.remove(temp)
                return
            }
            try io { () throws(FileSystemError) in
                if !fileSystem.fileExists(shard) {  // made by prepareDirectories(), unless removed since
                    try fileSystem.createDirectory(shard)
                    try fileSystem.fsyncDirectory(Path.parent(shard))
                }
                try fileSystem.rename(temp, to: final)
            }
            st.unsynced.insert(checksum)
        }
    }

    /// Makes the names of these blobs durable: fsyncs the shard directory of each one renamed into place since its
    /// directory was last synced (outside the lock; the others cost nothing). A save calls it for every blob it
    /// references after pinning them and before it commits. Blobs not in the store are skipped.
    package func makeDurable(_ checksums: [String]) throws {
        let pending = state.withLock { st in Set(checksums.filter { st.unsynced.contains($0) }) }
        guard !pending.isEmpty else { return }
        for shard in Set(pending.map { Path.parent(path(of: $0)) }).sorted() {
            try io { () throws(FileSystemError) in try fileSystem.fsyncDirectory(shard) }
        }
        // Each of them was renamed before `pending` was taken, so the fsyncs above cover it.
        state.withLock { st in st.unsynced.subtract(pending) }
    }

    /// Starts the blob's grace window again, as uploading its bytes again would (`assets/rereference` hands out a
    /// receipt for it): its modification time becomes now, and a sweep under way keeps it. False when the store
    /// has no such blob.
    package func refresh(_ checksum: String) -> Bool {
        guard Self.isChecksum(checksum) else { return false }
        return state.withLock { st in keep(checksum, &st) }
    }

    /// Under the lock: a sweep under way keeps the blob, and if its file exists its grace window starts again.
    /// Whether it exists.
    private func keep(_ checksum: String, _ st: inout PinState) -> Bool {
        st.touched?.insert(checksum)
        let path = path(of: checksum)
        guard fileSystem.fileExists(path) else { return false }
        Self.touch(path)
        return true
    }

    /// Sets the file's modification time to now (`utimensat`; the file-system seam has no times).
    private static func touch(_ path: String) { _ = utimensat(AT_FDCWD, path, nil, 0) }

    // MARK: - Pins

    /// Pins blobs for a save in flight and returns those that are not in the store (still pinned: unpin them all).
    package func pin(_ checksums: [String]) -> [String] {
        state.withLock { st in
            for c in checksums {
                st.pins[c, default: 0] += 1
                st.touched?.insert(c)
            }
            return checksums.filter { !exists($0) }
        }
    }

    package func unpin(_ checksums: [String]) {
        state.withLock { st in
            for c in checksums {
                guard let n = st.pins[c] else { continue }
                st.pins[c] = n > 1 ? n - 1 : nil
            }
        }
    }

    // MARK: - Inventory and sweeping

    /// One blob on disk.
    package struct Entry: Sendable {
        package var checksum: String
        package var size: Int64
        /// Last modification, seconds since 1970.
        package var modified: Double
    }

    /// Every blob on disk, sharded directory by directory (files that are not named like blobs are left out).
    package func list() throws -> [Entry] {
        var out: [Entry] = []
        let root = directory + "/sha256"
        guard fileSystem.fileExists(root) else { return [] }
        for shard in try io({ () throws(FileSystemError) in try fileSystem.listDirectory(root) }).sorted() {
            let dir = root + "/" + shard
            for name in try io({ () throws(FileSystemError) in try fileSystem.listDirectory(dir) }).sorted()
            where Self.isChecksum(name) && name.hasPrefix(shard) {
                var st = stat()
                guard stat(dir + "/" + name, &st) == 0 else { continue }
                out.append(
                    Entry(
                        checksum: name, size: Int64(st.st_size),
                        modified: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9))
            }
        }
        return out
    }

    /// What a sweep did.
    package struct SweepReport: Sendable {
        package var blobs = 0
        package var bytes: Int64 = 0
        package var deleted = 0
        package var deletedBytes: Int64 = 0
        /// Unreferenced, but kept: modified within the grace window, or pinned by a save.
        package var keptRecent = 0
        /// Distinct blobs the referenced set named.
        package var referenced = 0
    }

    /// Deletes every blob that is not in the set `referenced` returns, not pinned or written since this call began,
    /// and not modified after `cutoff` (seconds since 1970). `referenced` is called after the sweep has begun to
    /// remember pins and writes (the rule above). One collection at a time: a second caller waits for the first.
    package func collect(referenced: () throws -> Set<String>, cutoff: Double) throws -> SweepReport {
        sweeper.lock()
        defer { sweeper.unlock() }
        beginSweep()
        defer { state.withLock { $0.touched = nil } }
        let live = try referenced()
        var report = try sweep(referenced: live, cutoff: cutoff)
        report.referenced = live.count
        return report
    }

    /// From now on pins and writes are remembered (and what is pinned now).
    private func beginSweep() {
        state.withLock { st in
            precondition(st.touched == nil, "one sweep at a time")
            st.touched = Set(st.pins.keys)
        }
    }

    /// The deletions of ``collect(referenced:cutoff:)``, once it has begun and has the referenced set.
    private func sweep(referenced: Set<String>, cutoff: Double) throws -> SweepReport {
        var report = SweepReport()
        var shardsWithDeletions: Set<String> = []
        for blob in try list() {
            report.blobs += 1
            report.bytes += blob.size
            guard !referenced.contains(blob.checksum) else { continue }
            let deleted = try state.withLock { st -> Bool in
                if st.touched?.contains(blob.checksum) == true || st.pins[blob.checksum] != nil { return false }
                let path = path(of: blob.checksum)
                var s = stat()
                guard stat(path, &s) == 0 else { return false }
                guard Double(s.st_mtim.tv_sec) < cutoff else { return false }
                try io { () throws(FileSystemError) in try fileSystem.remove(path) }
                st.unsynced.remove(blob.checksum)
                return true
            }
            if deleted {
                shardsWithDeletions.insert(Path.parent(path(of: blob.checksum)))
                report.deleted += 1
                report.deletedBytes += blob.size
            } else {
                report.keptRecent += 1
            }
        }
        for shard in shardsWithDeletions.sorted() {
            try io { () throws(FileSystemError) in try fileSystem.fsyncDirectory(shard) }
        }
        return report
    }

    /// Whether the blob's bytes still hash to its name (a full read).
    package func verify(_ checksum: String) throws -> Bool {
        let file = try open(checksum)
        defer { try? file.close() }
        return try Self.contentHash(file).checksum == checksum
    }

    /// A whole file's length and SHA-256 (lowercase hex), read in ``chunkSize`` pieces.
    private static func contentHash(_ file: any File) throws -> (length: Int64, checksum: String) {
        let hash = SHA256Stream()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var length: Int64 = 0
        while true {
            let n = try io { () throws(FileSystemError) in try file.pread(into: buffer, at: UInt64(length)) }
            if n == 0 { break }
            hash.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            length += Int64(n)
        }
        return (length, hash.finishHex())
    }
}

/// A blob open for reading (a download), for callers above the file-system seam. Closed when released; the bytes
/// stay readable after a sweep deletes the blob's name.
package final class BlobReader: Sendable {
    private let file: any File
    package let size: Int64

    package init(_ store: BlobStore, _ checksum: String) throws {
        let file = try store.open(checksum)
        self.file = file
        do { size = Int64(try io { () throws(FileSystemError) in try file.size() }) } catch {
            try? file.close()
            throw error
        }
    }

    deinit { try? file.close() }

    /// Reads into `buffer` from `offset`; fewer bytes only at the end of the blob.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        try io { () throws(FileSystemError) in try file.pread(into: buffer, at: UInt64(offset)) }
    }

    /// A descriptor of the blob's file of its own (the caller closes it), or nil where the store's file system has
    /// none (in memory).
    package func duplicateDescriptor() -> Int32? { file.duplicateDescriptor() }
}

/// The file half of ``BlobStore/write(maxSize:pin:syncName:ended:next:)``, run on a thread of ``pool`` while the
/// caller hashes: the temporary file's creation (while the caller waits for the first piece), each piece's `pwrite`
/// (its writeback started every ``BlobStore/writebackWindow`` bytes), and the `fdatasync`. Jobs run one at a time,
/// in the order they were given; after one fails the rest are skipped and ``wait()`` throws its error.
///
/// `@unchecked Sendable`: the queue's state is a ``Monitor``'s; `file` and `unstarted` are touched by the jobs only
/// (one at a time), and `file` by the caller once no job is outstanding.
final class FileWriter: @unchecked Sendable {
    typealias Job = @Sendable () throws(FileSystemError) -> Void

    private struct Queue {
        var jobs: [Job] = []
        /// Whether a pool thread is draining `jobs`.
        var running = false
        /// Jobs started and not finished.
        var outstanding = 0
        /// The first error a job threw.
        var failure: FileSystemError?
    }

    private let queue = Monitor(Queue())
    /// The file once its creation job has run.
    private var file: (any File)?
    /// Where the writeback not yet started begins.
    private var unstarted: UInt64 = 0

    /// The writers' threads: a pool of their own, not ``BlockingThreads/shared``, because a write may itself run on
    /// a thread of that pool (an embedded save's import, offloaded there) and wait for its writer: with the pool at
    /// its cap, a job queued behind its own waiting caller would never run.
    static let pool = BlockingThreads(name: "cloudlet.asset-writer")

    /// Starts creating (or truncating) `path` on `fileSystem`.
    init(creating path: String, on fileSystem: any FileSystem) {
        start { [self] () throws(FileSystemError) in file = try fileSystem.open(path, options: [.create, .truncate]) }
    }

    /// A piece's address and length, handed to the job (the caller keeps it valid until ``wait()`` returns).
    private struct Piece: @unchecked Sendable { var bytes: UnsafeRawBufferPointer }

    /// Starts writing `bytes` at `offset`, then, with `sync`, the file's `fdatasync`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64, sync: Bool) {
        let piece = Piece(bytes: bytes)
        start { [self] () throws(FileSystemError) in
            guard let file else { return }
            try file.pwrite(piece.bytes, at: offset)
            let end = offset + UInt64(piece.bytes.count)
            if !sync, end - unstarted >= UInt64(BlobStore.writebackWindow) {  // the sync writes it all anyway
                file.startWriteback(at: unstarted, count: Int(end - unstarted))
                unstarted = end
            }
            if sync { try file.fdatasync() }
        }
    }

    /// Starts the file's `fdatasync`.
    func sync() { start { [self] () throws(FileSystemError) in try file?.fdatasync() } }

    private func start(_ job: @escaping Job) {
        let idle = queue.withLock { q in
            q.jobs.append(job)
            q.outstanding += 1
            let idle = !q.running
            q.running = true
            return idle
        }
        if idle { Self.pool.submit { [self] in drain() } }
    }

    /// Runs the queued jobs in order until none is left (on a pool thread).
    private func drain() {
        // The queue is found empty and `running` cleared in one critical section: a job started after that gets a
        // drain of its own, and two drains never run at once.
        while let (job, skip) = queue.withLock({ q -> (Job, Bool)? in
            guard !q.jobs.isEmpty else {
                q.running = false
                return nil
            }
            return (q.jobs.removeFirst(), q.failure != nil)
        }) {
            var error: FileSystemError?
            if !skip { do throws(FileSystemError) { try job() } catch let e { error = e } }
            queue.withLock { q in
                if let error, q.failure == nil { q.failure = error }
                q.outstanding -= 1
            }
            queue.broadcast(.progress)
        }
    }

    /// Waits for every job started so far; throws the first error one threw.
    func wait() throws(FileSystemError) {
        if let error = queue.withLock(waitingOn: .progress, until: { $0.outstanding == 0 }, { $0.failure }) { throw error }
    }

    /// Waits for the jobs still running, then closes the file: after this nothing uses it (or a piece). Throws
    /// the first error of a job, or of the close.
    func close() throws(FileSystemError) {
        defer { try? file?.close() }
        try wait()
        try file?.close()
    }
}
