import CloudletStorage
import CloudletTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("FileReplacement: write a temp file, fdatasync, rename, fsync the directory")
struct FileReplacementTests {
    @Test("replaces a file on disk and leaves no temp file")
    func posix() async throws {
        try await withTempDirectory { dir in
            let fs = PosixFileSystem()
            let path = dir + "/meta"
            try fs.replaceFile(path, with: [1, 2, 3])
            try fs.replaceFile(path, with: [4, 5])
            let file = try fs.open(path, options: .readOnly)
            defer { try? file.close() }
            #expect(try file.read(at: 0, count: 10) == [4, 5])
            #expect(try fs.listDirectory(dir) == ["meta"])
        }
    }

    @Test("content written in pieces is in place, and durable, only after commit")
    func piecesAndCrash() throws {
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/d")
        try fs.replaceFile("/d/f", with: [1])
        let replacement = try FileReplacement(replacing: "/d/f", fileSystem: fs)
        #expect(replacement.temporaryPath == "/d/f" + FileReplacement.temporarySuffix)
        try replacement.file.write([7, 7], at: 0)
        try replacement.file.write([8], at: 2)
        #expect(fs.contents(of: "/d/f") == [1])
        try replacement.commit()
        #expect(fs.contents(of: "/d/f") == [7, 7, 8])
        #expect(!fs.fileExists(replacement.temporaryPath))
        fs.crash()
        #expect(fs.contents(of: "/d/f") == [7, 7, 8])
    }

    @Test("a failed fdatasync leaves the old file in place")
    func failedSync() throws {
        let memory = InMemoryFileSystem()
        let fs = FaultInjectingFileSystem(wrapping: memory)
        try fs.createDirectory("/d")
        try fs.replaceFile("/d/f", with: [1])
        fs.failFdatasync()
        do throws(FileReplacementError) {
            try fs.replaceFile("/d/f", with: [2])
            Issue.record("the replacement succeeded")
        } catch {
            #expect(error.error.operation == "fdatasync" && error.error.errno == EIO)
            #expect(!error.replaced)
        }
        #expect(memory.contents(of: "/d/f") == [1])
        memory.crash()
        #expect(memory.contents(of: "/d/f") == [1])
    }

    @Test("a failed directory fsync says the file was replaced")
    func failedDirectorySync() throws {
        let fs = DirectorySyncFailing(base: InMemoryFileSystem())
        try fs.createDirectory("/d")
        do throws(FileReplacementError) {
            try fs.replaceFile("/d/f", with: [2])
            Issue.record("the replacement succeeded")
        } catch {
            #expect(error.replaced && error.error.path == "/d")
        }
        #expect(fs.fileExists("/d/f"))
    }

    /// Passes every call through but `fsyncDirectory`, which fails with `EIO`.
    struct DirectorySyncFailing: FileSystem {
        let base: any FileSystem
        func open(_ path: String, options: OpenOptions) throws(FileSystemError) -> any File {
            try base.open(path, options: options)
        }
        func listDirectory(_ path: String) throws(FileSystemError) -> [String] { try base.listDirectory(path) }
        func createDirectory(_ path: String) throws(FileSystemError) { try base.createDirectory(path) }
        func rename(_ from: String, to: String) throws(FileSystemError) { try base.rename(from, to: to) }
        func remove(_ path: String) throws(FileSystemError) { try base.remove(path) }
        func fsyncDirectory(_ path: String) throws(FileSystemError) {
            throw FileSystemError(operation: "fsync", path: path, errno: EIO)
        }
        func fileExists(_ path: String) -> Bool { base.fileExists(path) }
        func lockFile(_ path: String, exclusive: Bool) throws(FileSystemError) -> any FileLock {
            try base.lockFile(path, exclusive: exclusive)
        }
    }
}
