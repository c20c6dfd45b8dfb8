extension Array {
    /// Consecutive slices of at most `size` elements, in order (a batch split to a per-request limit).
    @inlinable
    public func chunked(_ size: Int) -> [ArraySlice<Element>] {
        precondition(size > 0, "chunk size must be positive")
        if count <= size { return isEmpty ? [] : [self[...]] }  // the usual case: one request
        return stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
