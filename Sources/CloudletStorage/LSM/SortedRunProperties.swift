import CloudletCore

/// What a sorted run says about itself in its properties block (SortedRunFormat.md, "Properties block").
public struct SortedRunProperties: Sendable, Hashable {
    /// The format version of the file (the footer's).
    public var formatVersion: UInt16 = SortedRunLayout.formatVersion
    /// The file number the run was written as (its name).
    public var fileNumber: UInt64 = 0
    public var entryCount: UInt64 = 0
    /// How many of the entries are tombstones.
    public var tombstoneCount: UInt64 = 0
    public var dataBlockCount: UInt64 = 0
    /// The first and last key; empty when the run has no entries.
    public var smallestKey: [UInt8] = []
    public var largestKey: [UInt8] = []
    /// The lowest and highest sequence number of the entries (0 and 0 when there are none).
    public var minSequence: UInt64 = 0
    public var maxSequence: UInt64 = 0
    /// The keys' and values' bytes before prefix compression and LZ4.
    public var rawKeyBytes: UInt64 = 0
    public var rawValueBytes: UInt64 = 0
    /// When the run was written, in seconds since 1970.
    public var creationTime: UInt64 = 0
    /// Who wrote it and why, e.g. `flush` or `merge L0→L1` (free text).
    public var creator: String = ""

    public init() {}

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 64 + smallestKey.count + largestKey.count + creator.utf8.count)
        w.varint(fileNumber)
        w.varint(entryCount)
        w.varint(tombstoneCount)
        w.varint(dataBlockCount)
        w.bytes(smallestKey)
        w.bytes(largestKey)
        w.varint(minSequence)
        w.varint(maxSequence)
        w.varint(rawKeyBytes)
        w.varint(rawValueBytes)
        w.varint(creationTime)
        w.string(creator)
        return w.bytes
    }

    /// Decodes a properties block; bytes after the known fields are ignored (a later version may append fields).
    init(decoding bytes: [UInt8]) throws {
        var r = ByteReader(bytes, what: "properties")
        fileNumber = try r.varint()
        entryCount = try r.varint()
        tombstoneCount = try r.varint()
        dataBlockCount = try r.varint()
        smallestKey = try r.bytes()
        largestKey = try r.bytes()
        minSequence = try r.varint()
        maxSequence = try r.varint()
        rawKeyBytes = try r.varint()
        rawValueBytes = try r.varint()
        creationTime = try r.varint()
        creator = try r.string()
    }
}

/// How runs are written. Readers need none of it: everything a reader must know is in the file.
public struct SortedRunConfiguration: Sendable, Hashable {
    /// Uncompressed size at which a data block is closed (the entry that crosses it is the block's last).
    /// Default 4 KiB.
    public var blockSize = 4096
    /// Every this many entries a key is stored whole (a restart point). Default 16.
    public var restartInterval = 16
    /// Bloom filter bits per key. Default 10 (about 1% false positives).
    public var bloomBitsPerKey = 10
    /// Whether blocks are LZ4-compressed (kept only where that saves at least 1/8). Default true.
    public var compression = true

    public init() {}
}
