/// What opening (or scanning) a log found: how much was replayed and whether a torn tail was cut off.
public struct LogRecoveryReport: Sendable, Hashable {
    /// A torn write at the end of the last segment: the end of the log.
    public struct TornTail: Sendable, Hashable {
        /// The segment file.
        public var path: String
        /// Where the log ends: the file was (or, read-only, would be) truncated to this size.
        public var offset: UInt64
        /// What was wrong at `offset` ("frame of 120 bytes runs past end of file …").
        public var reason: String
        /// Bytes after `offset` that were (or would be) dropped.
        public var droppedBytes: UInt64
    }

    /// Frames passed to the replay closure.
    public var framesReplayed: Int = 0
    /// The LSN of the last valid frame (0 for an empty log).
    public var lastLSN: UInt64 = 0
    /// The epoch of the last frame recovery checked (0 when it checked none: an empty log, or a checkpoint at its end).
    public var lastEpoch: UInt64 = 0
    /// Whether recovery started at the checkpoint's position instead of scanning from the first segment.
    public var usedStartHint = false
    /// The torn tail found in the last segment, if any.
    public var tornTail: TornTail?
    /// Whether the last segment's header was unfinished (a crash while creating it) and was rewritten.
    public var rewroteSegmentHeader = false
    /// Files left by an interrupted compaction (new segments that never took effect, or old ones it replaced):
    /// removed by a read-write open, ignored read-only.
    public var leftoverFiles: [String] = []
}
