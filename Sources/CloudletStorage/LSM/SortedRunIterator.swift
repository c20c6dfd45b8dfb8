/// An iterator over one run's entries in key order (``SortedRunReader/makeIterator()``). Not thread-safe; make one
/// per thread. Besides each block's own checks it checks that keys increase across blocks and stay within their
/// block's separator, so a damaged index cannot make it return entries out of order.
public final class SortedRunIterator: LSMIterator {
    public let reader: SortedRunReader
    private let fillCache: Bool
    private var blockIndex = 0
    private var cursor: BlockCursor?
    /// The run's index, kept when a block is loaded: every step checks its key against the block's separator, and the
    /// index need not be fetched for that each time.
    private var index: SortedRunReader.RunIndex?
    public private(set) var current: LSMEntry?

    init(_ reader: SortedRunReader, fillCache: Bool) {
        self.reader = reader
        self.fillCache = fillCache
    }

    public func seekToFirst() throws {
        try load(block: 0, after: nil) { cursor throws(Block.Defect) in try cursor.seekToFirst() }
    }

    public func seek(_ key: [UInt8]) throws {
        let block = try reader.runIndex().separators.firstAtLeast(key)
        try load(block: block, after: nil) { cursor throws(Block.Defect) in try cursor.seek(key) }
    }

    public func advance() throws {
        guard current != nil, cursor != nil else { return }
        // Advanced in place: a copy of the cursor would retain its block and write it back each step.
        do throws(Block.Defect) { try cursor!.advance() } catch { throw reader.defect(error, block: blockIndex) }
        if cursor!.current == nil {
            try load(block: blockIndex + 1, after: current?.key) { cursor throws(Block.Defect) in try cursor.seekToFirst() }
        } else {
            try settle()
        }
    }

    /// Positions in block `i` with `position`, moving on to the next blocks while that leaves it past the end.
    /// `previous`: the key the iterator stepped from, which the new position must follow.
    private func load(
        block i: Int, after previous: [UInt8]?, _ position: (inout BlockCursor) throws(Block.Defect) -> Void
    ) throws {
        var i = i
        var first = true
        let index = try reader.runIndex()
        let blockCount = index.handles.count
        while i < blockCount {
            var c = BlockCursor(try reader.block(i, fillCache: fillCache))
            do throws(Block.Defect) {
                if first { try position(&c) } else { try c.seekToFirst() }
            } catch { throw reader.defect(error, block: i) }
            if c.current != nil {
                if let previous, LSMKey.compare(c.key, previous) <= 0 {
                    throw reader.defect(Block.Defect("block's first key does not follow the previous block's"), block: i)
                }
                blockIndex = i
                self.index = index
                cursor = c
                try settle()
                return
            }
            first = false
            i += 1
        }
        blockIndex = blockCount
        cursor = nil
        current = nil
    }

    /// Decodes the cursor's entry into ``current``.
    private func settle() throws {
        guard index!.separators.compare(blockIndex, cursor!.key) >= 0 else {
            throw reader.defect(Block.Defect("key past its block's index separator"), block: blockIndex)
        }
        current = try reader.entry(key: cursor!.key, value: cursor!.value, block: blockIndex)
    }
}
