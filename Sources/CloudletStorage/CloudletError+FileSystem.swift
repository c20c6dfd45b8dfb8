import CloudletCore

extension CloudletError {
    /// An `.io` error for a failed file-system call: what we were doing, then the call, path and errno.
    package static func io(_ error: FileSystemError, _ doing: String) -> CloudletError {
        CloudletError(.io, "\(doing): \(error)", cause: error)
    }

    /// A `.corruption` error at a byte offset of a segment file: "segment <path> offset <n>: <what>".
    static func corruption(segment path: String, offset: UInt64, _ what: String) -> CloudletError {
        .corruption("segment \(path) offset \(offset): \(what)")
    }
}

/// Runs a file-layer call and turns its typed error into a ``CloudletError`` with code `io` (`package`: the engine
/// and the offline tooling make file-system calls of their own).
package func io<T>(_ body: () throws(FileSystemError) -> T) throws -> T {
    do { return try body() } catch { throw CloudletError.io(error.description) }
}
