/// One frame of a partition's log: one commit, as opaque bytes. The storage layer knows nothing of what the
/// payload means; `type` tells the layer above how to decode it.
public struct Frame: Sendable {
    /// The log sequence number: dense and increasing in a partition.
    public var lsn: UInt64
    /// The leader epoch that wrote it.
    public var epoch: UInt64
    /// The frame type (never 0), chosen by the layer above.
    public var type: UInt8
    /// The stored flags (bit 0: the payload is stored LZ4-compressed).
    public var flags: UInt8
    /// The payload, decompressed.
    public var payload: [UInt8]
    /// Where it is on disk.
    public var position: FramePosition

    public init(lsn: UInt64, epoch: UInt64, type: UInt8, flags: UInt8, payload: [UInt8], position: FramePosition) {
        self.lsn = lsn
        self.epoch = epoch
        self.type = type
        self.flags = flags
        self.payload = payload
        self.position = position
    }

    /// Whether the payload was stored LZ4-compressed.
    public var isCompressed: Bool { flags & FrameHeader.lz4Flag != 0 }
}
