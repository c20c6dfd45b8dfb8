#if canImport(Glibc)
import Glibc
#endif
import CloudletStorage
import Synchronization

/// A file system in memory that remembers what is durable, for crash tests (LevelDB's `FaultInjectionTestEnv`).
///
/// Every file keeps two images: its current bytes and its bytes as of the last ``File/fdatasync()``. The directory
/// tree keeps two namespaces: the current one and the one as of the last ``fsyncDirectory(_:)`` of each directory
/// (creations, renames and removals are durable only after it). ``crash(keepingUnsynced:)`` throws away everything
/// that was not made durable and invalidates every open handle, as a power failure would.
public final class InMemoryFileSystem: FileSystem {
    struct Inode {
        var data: [UInt8] = []
        var synced: [UInt8] = []
    }

    struct State {
        var inodes: [Int: Inode] = [:]
        /// Path → inode, as the running process sees it.
        var names: [String: Int] = [:]
        /// Path → inode, as it would survive a crash.
        var durableNames: [String: Int] = [:]
        /// Directories are created durably (a simplification: the log never depends on a directory's own creation).
        var directories: Set<String> = ["/", "."]
        var nextInode = 1
        /// Bumped by a crash; handles from an older generation fail with `EIO`.
        var generation = 0
        /// Inode → the locks held on it (lock number → exclusive or not), the in-process `flock` table.
        var locks: [Int: [Int: Bool]] = [:]
        var nextLock = 1
    }

    let state = Mutex(State())
    let preads = Atomic<Int>(0)

    /// How many positioned reads files of this file system served (a test counts a reader's system calls).
    public var readCalls: Int { preads.load(ordering: .relaxed) }

    public init() {}

    public func open(_ path: String, options: OpenOptions) throws(FileSystemError) -> any File {
        let path = Path.normalize(path)
        let (inode, generation) = try state.withLock { s throws(FileSystemError) -> (Int, Int) in
            if let inode = s.names[path] {
                if options.contains(.truncate) && !options.contains(.readOnly) { s.inodes[inode]!.data = [] }
                return (inode, s.generation)
            }
            if s.directories.contains(path) { throw FileSystemError(operation: "open", path: path, errno: EISDIR) }
            guard options.contains(.create) && !options.contains(.readOnly) else {
                throw FileSystemError(operation: "open", path: path, errno: ENOENT)
            }
            guard s.directories.contains(Path.parent(path)) else {
                throw FileSystemError(operation: "open", path: path, errno: ENOENT)
            }
            let inode = s.nextInode
            s.nextInode += 1
            s.inodes[inode] = Inode()
            s.names[path] = inode
            return (inode, s.generation)
        }
        return InMemoryFile(
            fileSystem: self, inode: inode, generation: generation, path: path,
            readOnly: options.contains(.readOnly))
    }

    public func listDirectory(_ path: String) throws(FileSystemError) -> [String] {
        let path = Path.normalize(path)
        return try state.withLock { s throws(FileSystemError) -> [String] in
            guard s.directories.contains(path) else {
                throw FileSystemError(operation: "opendir", path: path, errno: ENOENT)
            }
            let files = s.names.keys.filter { Path.parent($0) == path }
            let dirs = s.directories.filter { $0 != path && Path.parent($0) == path }
            return (files + dirs).map(Path.name)
        }
    }

    public func createDirectory(_ path: String) throws(FileSystemError) {
        var path = Path.normalize(path)
        try state.withLock { s throws(FileSystemError) in
            if s.names[path] != nil { throw FileSystemError(operation: "mkdir", path: path, errno: ENOTDIR) }
            while !s.directories.contains(path) {
                s.directories.insert(path)
                path = Path.parent(path)
            }
        }
    }

    public func rename(_ from: String, to: String) throws(FileSystemError) {
        let from = Path.normalize(from)
        let to = Path.normalize(to)
        try state.withLock { s throws(FileSystemError) in
            guard let inode = s.names.removeValue(forKey: from) else {
                throw FileSystemError(operation: "rename to \(to)", path: from, errno: ENOENT)
            }
            s.names[to] = inode
        }
    }

    public func remove(_ path: String) throws(FileSystemError) {
        let path = Path.normalize(path)
        try state.withLock { s throws(FileSystemError) in
            if s.names.removeValue(forKey: path) == nil {
                throw FileSystemError(operation: "unlink", path: path, errno: ENOENT)
            }
        }
    }

    public func fsyncDirectory(_ path: String) throws(FileSystemError) {
        let path = Path.normalize(path)
        try state.withLock { s throws(FileSystemError) in
            guard s.directories.contains(path) else {
                throw FileSystemError(operation: "open directory", path: path, errno: ENOENT)
            }
            for name in s.durableNames.keys where Path.parent(name) == path { s.durableNames[name] = nil }
            for (name, inode) in s.names where Path.parent(name) == path { s.durableNames[name] = inode }
        }
    }

    public func fileExists(_ path: String) -> Bool {
        let path = Path.normalize(path)
        return state.withLock { $0.names[path] != nil || $0.directories.contains(path) }
    }

    public func lockFile(_ path: String, exclusive: Bool) throws(FileSystemError) -> any FileLock {
        let file = try openForLocking(path, exclusive: exclusive)
        let inode = (file as! InMemoryFile).inode
        let number = state.withLock { s -> Int? in
            let held = s.locks[inode] ?? [:]
            guard exclusive ? held.isEmpty : !held.values.contains(true) else { return nil }
            let number = s.nextLock
            s.nextLock += 1
            s.locks[inode, default: [:]][number] = exclusive
            return number
        }
        guard let number else {
            try? file.close()
            throw FileSystemError(operation: "flock", path: file.path, errno: EWOULDBLOCK)
        }
        return InMemoryFileLock(fileSystem: self, file: file, inode: inode, number: number)
    }

    /// Drops lock `number` on `inode` (gone already if a crash ended the "process" that held it).
    func unlock(inode: Int, number: Int) {
        state.withLock { s in
            s.locks[inode]?[number] = nil
            if s.locks[inode]?.isEmpty == true { s.locks[inode] = nil }
        }
    }

    /// Simulates a power failure: every file goes back to its last fdatasync'd image and every directory to its
    /// last fsync'd entries; open handles become unusable (`EIO`) and locks are gone, as the process that held them.
    ///
    /// - Parameter keepingUnsynced: for each surviving file, given its path and how many bytes past the synced
    ///   image it currently holds, how many of those to keep (a prefix; by default none). Models a disk that got
    ///   part of the last writes out before power went away.
    public func crash(keepingUnsynced: (_ path: String, _ unsyncedBytes: Int) -> Int = { _, _ in 0 }) {
        state.withLock { s in
            s.generation += 1
            s.locks = [:]
            s.names = s.durableNames
            for (path, id) in s.names {
                let inode = s.inodes[id]!
                let extra = max(0, inode.data.count - inode.synced.count)
                let keep = extra == 0 ? 0 : min(extra, max(0, keepingUnsynced(path, extra)))
                var image = inode.synced
                if keep > 0 { image = Array(inode.data[0..<(inode.synced.count + keep)]) }
                s.inodes[id] = Inode(data: image, synced: image)
            }
        }
    }

    /// The current bytes of a file, or nil if there is none (for tests).
    public func contents(of path: String) -> [UInt8]? {
        let path = Path.normalize(path)
        return state.withLock { s in s.names[path].map { s.inodes[$0]!.data } }
    }

    /// Replaces the bytes of a file, creating it durably (for tests that damage files).
    public func setContents(of path: String, to bytes: [UInt8]) {
        let path = Path.normalize(path)
        state.withLock { s in
            let id: Int
            if let existing = s.names[path] {
                id = existing
            } else {
                id = s.nextInode
                s.nextInode += 1
            }
            s.inodes[id] = Inode(data: bytes, synced: bytes)
            s.names[path] = id
            s.durableNames[path] = id
        }
    }

    /// Runs `body` on the inode behind a handle, failing if the handle is stale (from before a crash).
    func withInode<R>(
        _ id: Int, generation: Int, path: String, operation: String,
        _ body: (inout Inode) throws(FileSystemError) -> R
    ) throws(FileSystemError) -> R {
        try state.withLock { s throws(FileSystemError) -> R in
            guard s.generation == generation else { throw FileSystemError(operation: operation, path: path, errno: EIO) }
            return try body(&s.inodes[id]!)
        }
    }
}

/// A handle on an ``InMemoryFileSystem`` inode. Sendable: its stored properties are immutable (`closed` is atomic)
/// and all data lives behind the file system's mutex.
final class InMemoryFile: File {
    let fileSystem: InMemoryFileSystem
    let inode: Int
    let generation: Int
    let path: String
    let readOnly: Bool
    private let closed = Atomic<Bool>(false)

    init(fileSystem: InMemoryFileSystem, inode: Int, generation: Int, path: String, readOnly: Bool) {
        self.fileSystem = fileSystem
        self.inode = inode
        self.generation = generation
        self.path = path
        self.readOnly = readOnly
    }

    private func with<R>(_ operation: String, write: Bool = false, _ body: (inout InMemoryFileSystem.Inode) -> R)
        throws(FileSystemError) -> R
    {
        if closed.load(ordering: .acquiring) || (write && readOnly) {
            throw FileSystemError(operation: operation, path: path, errno: EBADF)
        }
        return try fileSystem.withInode(inode, generation: generation, path: path, operation: operation) {
            (node: inout InMemoryFileSystem.Inode) throws(FileSystemError) -> R in body(&node)
        }
    }

    func pread(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int {
        fileSystem.preads.add(1, ordering: .relaxed)
        return try with("pread") { node in
            guard buffer.count > 0, offset < UInt64(node.data.count) else { return 0 }
            let n = min(buffer.count, node.data.count - Int(offset))
            node.data.withUnsafeBytes { src in
                buffer.baseAddress!.copyMemory(from: src.baseAddress! + Int(offset), byteCount: n)
            }
            return n
        }
    }

    func pwrite(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError) {
        try with("pwrite", write: true) { node in
            guard bytes.count > 0 else { return }
            let end = Int(offset) + bytes.count
            if node.data.count < end { node.data.append(contentsOf: repeatElement(0, count: end - node.data.count)) }
            node.data.withUnsafeMutableBytes { dst in
                (dst.baseAddress! + Int(offset)).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            }
        }
    }

    func fdatasync() throws(FileSystemError) {
        try with("fdatasync") { node in node.synced = node.data }
    }

    func truncate(to size: UInt64) throws(FileSystemError) {
        try with("ftruncate", write: true) { node in
            let size = Int(size)
            if node.data.count > size {
                node.data.removeLast(node.data.count - size)
            } else {
                node.data.append(contentsOf: repeatElement(0, count: size - node.data.count))
            }
        }
    }

    func size() throws(FileSystemError) -> UInt64 {
        try with("fstat") { node in UInt64(node.data.count) }
    }

    func close() throws(FileSystemError) {
        closed.store(true, ordering: .releasing)
    }
}

/// A lock in an ``InMemoryFileSystem``'s table. Sendable: its stored properties are immutable (`released` is
/// atomic); the table lives behind the file system's mutex.
final class InMemoryFileLock: FileLock {
    let fileSystem: InMemoryFileSystem
    let file: any File
    let inode: Int
    let number: Int
    private let released = Atomic<Bool>(false)

    init(fileSystem: InMemoryFileSystem, file: any File, inode: Int, number: Int) {
        self.fileSystem = fileSystem
        self.file = file
        self.inode = inode
        self.number = number
    }

    func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        fileSystem.unlock(inode: inode, number: number)
        try? file.close()
    }

    deinit { release() }
}
