import CloudletCore

/// Builds the contents of one block (SortedRunFormat.md, "Block contents"): entries in increasing key order, each
/// key stored as the length it shares with the previous key plus the rest; every `restartInterval`-th entry is a
/// restart point that stores its whole key, and the restart offsets close the block so that a reader can binary
/// search them.
struct BlockBuilder {
    let restartInterval: Int
    private(set) var bytes: [UInt8] = []
    private var restarts: [UInt32] = []
    private var sinceRestart = 0
    private(set) var lastKey: [UInt8] = []
    private(set) var count = 0

    init(restartInterval: Int) {
        precondition(restartInterval >= 1)
        self.restartInterval = restartInterval
    }

    var isEmpty: Bool { count == 0 }

    /// The size of the block if it were finished now.
    var estimatedSize: Int { bytes.count + 4 * (restarts.count + 1) }

    /// Appends an entry; `key` must sort after the previous one.
    mutating func add(key: [UInt8], value: some Collection<UInt8>) {
        precondition(count == 0 || LSMKey.compare(key, lastKey) > 0, "block keys must increase")
        var shared = 0
        if sinceRestart == restartInterval || count == 0 {
            restarts.append(UInt32(bytes.count))
            sinceRestart = 0
        } else {
            let limit = min(key.count, lastKey.count)
            while shared < limit && key[shared] == lastKey[shared] { shared += 1 }
        }
        var w = ByteWriter(capacity: 16)
        w.varint(shared)
        w.varint(key.count - shared)
        w.varint(value.count)
        bytes += w.bytes
        bytes += key[shared...]
        bytes += value
        lastKey = key
        sinceRestart += 1
        count += 1
    }

    /// The finished block contents; the builder is empty again afterwards.
    mutating func finish() -> [UInt8] {
        var w = ByteWriter(capacity: 4 * (restarts.count + 1))
        for r in restarts { w.u32(r) }
        w.u32(UInt32(restarts.count))
        var out = bytes
        out += w.bytes
        self = BlockBuilder(restartInterval: restartInterval)
        return out
    }
}
