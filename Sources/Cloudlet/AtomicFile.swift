import CloudletCore
import CloudletStorage

/// Replaces small metadata files crash-safely: write a temp file, fdatasync, rename over the target, fsync the
/// directory. After a crash the file is either the old or the new version, never a mix.
enum AtomicFile {
    static func write(_ bytes: [UInt8], to path: String, fileSystem: any FileSystem = PosixFileSystem()) throws {
        let dir = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        let temp = path + ".tmp"
        try io {
            () throws(FileSystemError) in
            let f = try fileSystem.open(temp, options: [.create, .truncate])
            try f.write(bytes, at: 0)
            try f.fdatasync()
            try f.close()
            try fileSystem.rename(temp, to: path)
            try fileSystem.fsyncDirectory(dir)
        }
    }
}

/// Runs a file-layer call and turns its typed error into a ``CloudletError`` with code `io`.
package func io<T>(_ body: () throws(FileSystemError) -> T) throws -> T {
    do { return try body() } catch { throw CloudletError.io(error.description) }
}
