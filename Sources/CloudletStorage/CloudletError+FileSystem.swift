import CloudletCore

extension CloudletError {
    /// An `.io` error for a failed file-system call: what we were doing, then the call, path and errno.
    static func io(_ error: FileSystemError, _ doing: String) -> CloudletError {
        CloudletError(.io, "\(doing): \(error)", cause: error)
    }

    /// A `.corruption` error at a byte offset of a segment file: "segment <path> offset <n>: <what>".
    static func corruption(segment path: String, offset: UInt64, _ what: String) -> CloudletError {
        .corruption("segment \(path) offset \(offset): \(what)")
    }
}
