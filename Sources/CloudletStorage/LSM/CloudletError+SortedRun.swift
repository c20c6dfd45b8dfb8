import CloudletCore

extension CloudletError {
    /// A `.corruption` error at a byte offset of a sorted run file: "sorted run <path> offset <n>: <what>".
    static func corruption(run path: String, offset: UInt64, _ what: String) -> CloudletError {
        .corruption("sorted run \(path) offset \(offset): \(what)")
    }
}
