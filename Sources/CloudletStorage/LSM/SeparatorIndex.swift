/// The separators of a run's index block (data block `i` holds the keys in (separator `i - 1`, separator `i`]), kept
/// one after another in one buffer with their end offsets: loading a run's index makes two arrays, not one per data
/// block, and a binary search compares bytes where they lie (a 64 MB run has ~16,000 blocks; as `[[UInt8]]` its
/// index took 16,000 allocations to load and ~48 bytes of overhead a separator to keep).
struct SeparatorIndex: Sendable {
    /// Every separator's bytes, in order.
    private(set) var bytes: [UInt8] = []
    /// Where separator `i` ends in ``bytes`` (it starts where separator `i - 1` ends).
    private(set) var ends: [UInt32] = []

    init() {}

    /// Room for `count` separators of `byteCount` bytes in all.
    init(reservingCapacity count: Int, bytes byteCount: Int) {
        ends.reserveCapacity(count)
        bytes.reserveCapacity(byteCount)
    }

    var count: Int { ends.count }

    /// Where separator `i` lies in ``bytes``.
    func range(_ i: Int) -> Range<Int> { (i == 0 ? 0 : Int(ends[i - 1]))..<Int(ends[i]) }

    /// Separator `i`.
    subscript(i: Int) -> ArraySlice<UInt8> { bytes[range(i)] }

    /// How long the last separator is (0 when there is none).
    var lastCount: Int { count == 0 ? 0 : range(count - 1).count }

    /// Whether the separator made of the last one's first `shared` bytes (at most ``lastCount``) and then `rest`
    /// would follow the last one: whether `rest` is above the last one's bytes after `shared`.
    func follows(sharing shared: Int, _ rest: ArraySlice<UInt8>) -> Bool {
        guard count > 0 else { return true }
        let r = range(count - 1)
        return bytes.withUnsafeBytes { all in LSMKey.compare(rest, UnsafeRawBufferPointer(rebasing: all[(r.lowerBound + shared)..<r.upperBound])) > 0 }
    }

    /// Appends a separator made of the first `shared` bytes of the last one and then `rest` (an index block's
    /// prefix-compressed entry). The caller checks the order (``follows(sharing:_:)``).
    mutating func append(sharing shared: Int, _ rest: ArraySlice<UInt8>) {
        let start = bytes.count
        if shared > 0 {
            let previous = range(count - 1).lowerBound
            // Byte by byte: appending a slice of the array to itself would copy the whole buffer first.
            for j in 0..<shared { bytes.append(bytes[previous + j]) }
        }
        bytes.append(contentsOf: rest)
        ends.append(UInt32(start + shared + rest.count))
    }

    /// Separator `i` compared with `key` (memcmp order, then length): negative, zero or positive.
    func compare(_ i: Int, _ key: some ContiguousByteCollection) -> Int {
        let r = range(i)
        return bytes.withUnsafeBytes { all in LSMKey.compare(UnsafeRawBufferPointer(rebasing: all[r]), key) }
    }

    /// The first separator at or after `from` that is at least `key` (``count`` if none): the block that would
    /// hold `key`.
    func firstAtLeast(_ key: some ContiguousByteCollection, from: Int = 0) -> Int {
        bytes.withUnsafeBytes { all in
            key.withUnsafeBytes { k in
                var lo = from
                var hi = ends.count
                while lo < hi {
                    let mid = (lo + hi) / 2
                    let r = range(mid)
                    if LSMKey.compare(UnsafeRawBufferPointer(rebasing: all[r]), k) < 0 { lo = mid + 1 } else { hi = mid }
                }
                return lo
            }
        }
    }
}
