import CloudletStorage
import CloudletTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("File layer: POSIX, in-memory and fault-injecting file systems")
struct FileSystemTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case posix, inMemory
        var testDescription: String { rawValue }
    }

    @Test("the protocol behaves the same on both implementations", arguments: Kind.allCases)
    func basics(_ kind: Kind) async throws {
        try await withTempDirectory { tmp in
            let fs: any FileSystem = kind == .posix ? PosixFileSystem() : InMemoryFileSystem()
            let dir = kind == .posix ? tmp + "/a/b" : "/a/b"
            try fs.createDirectory(dir)
            try fs.createDirectory(dir)  // exists: fine
            let file = try fs.open(dir + "/f", options: [.create])
            try file.write([1, 2, 3, 4, 5], at: 0)
            try file.write([9, 9], at: 7)  // leaves a hole of zeros
            #expect(try file.size() == 9)
            #expect(try file.read(at: 3, count: 100) == [4, 5, 0, 0, 9, 9])
            #expect(try file.read(at: 20, count: 4) == [])
            try file.truncate(to: 2)
            try file.fdatasync()
            #expect(try file.read(at: 0, count: 10) == [1, 2])
            try file.close()
            try file.close()  // idempotent
            #expect(throws: FileSystemError.self) { try file.size() }

            try fs.rename(dir + "/f", to: dir + "/g")
            try fs.fsyncDirectory(dir)
            #expect(!fs.fileExists(dir + "/f") && fs.fileExists(dir + "/g"))
            #expect(try fs.listDirectory(dir) == ["g"])
            let readOnly = try fs.open(dir + "/g", options: .readOnly)
            #expect(throws: FileSystemError.self) { try readOnly.write([1], at: 0) }
            try readOnly.close()
            try fs.remove(dir + "/g")
            #expect(try fs.listDirectory(dir) == [])
            do throws(FileSystemError) {
                _ = try fs.open(dir + "/missing", options: [])
                Issue.record("opened a missing file")
            } catch {
                #expect(error.errno == ENOENT)
                #expect(error.description.contains(dir + "/missing"))
            }
        }
    }

    @Test("crash() keeps only fdatasync'd bytes and fsync'd directory entries")
    func inMemoryCrash() throws {
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/d")
        let synced = try fs.open("/d/synced", options: .create)
        try synced.write([1, 2, 3], at: 0)
        try synced.fdatasync()
        try synced.write([4, 5], at: 3)
        try fs.fsyncDirectory("/d")
        let unlisted = try fs.open("/d/unlisted", options: .create)  // created after the directory sync
        try unlisted.write([7], at: 0)
        try unlisted.fdatasync()
        try fs.rename("/d/synced", to: "/d/renamed")  // not followed by fsyncDirectory

        fs.crash()
        #expect(fs.contents(of: "/d/synced") == [1, 2, 3])
        #expect(fs.contents(of: "/d/renamed") == nil)
        #expect(fs.contents(of: "/d/unlisted") == nil)
        #expect(throws: FileSystemError.self) { try synced.read(at: 0, count: 1) }  // handles die with the crash

        let again = try fs.open("/d/synced", options: [])
        try again.write([8, 8, 8, 8], at: 3)
        fs.crash { _, unsynced in
            #expect(unsynced == 4)
            return 1
        }
        #expect(fs.contents(of: "/d/synced") == [1, 2, 3, 8])
    }

    @Test("fault injection: the Nth fdatasync fails, a torn write keeps a prefix, ENOSPC on every write")
    func faults() throws {
        let memory = InMemoryFileSystem()
        let fs = FaultInjectingFileSystem(wrapping: memory)
        let file = try fs.open("/f", options: .create)
        fs.failFdatasync(nth: 2)
        try file.fdatasync()
        #expect { try file.fdatasync() } throws: { ($0 as? FileSystemError)?.errno == EIO }
        try file.fdatasync()
        #expect(fs.fdatasyncCount == 3)

        fs.failWrites(errno: ENOSPC)
        #expect { try file.write([1], at: 0) } throws: { ($0 as? FileSystemError)?.errno == ENOSPC }
        fs.clearFaults()
        try file.write([1, 2], at: 0)

        fs.tearWrite(nth: 2, keeping: 3)
        try file.write([3], at: 2)
        #expect(throws: FileSystemError.self) { try file.write([4, 5, 6, 7, 8], at: 3) }
        #expect(memory.contents(of: "/f") == [1, 2, 3, 4, 5, 6])
        #expect(throws: FileSystemError.self) { try file.write([0], at: 0) }  // the process is "dead"
        #expect(throws: FileSystemError.self) { try file.fdatasync() }
    }

    @Test("lockFile: an exclusive lock excludes every other, shared locks coexist, release frees", arguments: Kind.allCases)
    func locks(_ kind: Kind) async throws {
        try await withTempDirectory { tmp in
            let fs: any FileSystem = kind == .posix ? PosixFileSystem() : InMemoryFileSystem()
            let dir = kind == .posix ? tmp : "/d"
            try fs.createDirectory(dir)
            let path = dir + "/LOCK"
            func refused(exclusive: Bool) -> Bool {
                do throws(FileSystemError) {
                    try fs.lockFile(path, exclusive: exclusive).release()
                    return false
                } catch {
                    return error.errno == EWOULDBLOCK
                }
            }
            let writer = try fs.lockFile(path, exclusive: true)
            try writer.file.write([7], at: 0)
            #expect(refused(exclusive: true) && refused(exclusive: false))
            writer.release()
            writer.release()  // idempotent
            let a = try fs.lockFile(path, exclusive: false)
            let b = try fs.lockFile(path, exclusive: false)
            #expect(try a.file.read(at: 0, count: 1) == [7])
            #expect(refused(exclusive: true))
            a.release()
            #expect(refused(exclusive: true))
            b.release()
            #expect(!refused(exclusive: true))
        }
    }

    @Test("a crash of the in-memory file system drops its locks with the process that held them")
    func inMemoryCrashDropsLocks() throws {
        let fs = InMemoryFileSystem()
        let held = try fs.lockFile("/LOCK", exclusive: true)
        try fs.fsyncDirectory("/")  // the file survives the crash: the same inode is locked again after it
        fs.crash()
        let next = try fs.lockFile("/LOCK", exclusive: true)
        held.release()  // the dead holder's release must not free the new lock
        #expect(throws: FileSystemError.self) { try fs.lockFile("/LOCK", exclusive: false) }
        next.release()
    }
}
