import CloudletCore
import CloudletStorage

/// The deterministic workload of the LSM crash tests: write `i` (1, 2, 3…) of a seed is always the same put or
/// delete, so the parent can tell what a tree must hold after the child (`cloudlet-crash-writer --mode lsm`) was
/// killed: exactly writes `1…logPosition`, where the log position is the index of the last durable flush.
public enum LSMCrashWorkload {
    /// Flush (and merge) after every this many writes.
    public static let flushInterval = 50

    /// A tree configuration that makes many small runs, merges and levels; merges run in the writer's thread.
    public static var configuration: LSMTreeConfiguration {
        var c = LSMTreeConfiguration()
        c.run.blockSize = 256
        c.targetRunSize = 2 << 10
        c.level0MergeTrigger = 2
        c.level1Size = 6 << 10
        c.levelSizeMultiplier = 2
        c.mergeBytesPerSecond = nil
        c.backgroundMerges = false
        return c
    }

    /// Write `i` (≥ 1): a put (80%) or a delete of one of 400 keys, with sequence `i`.
    public static func entry(_ i: Int, seed: UInt64) -> LSMEntry {
        let h = SplitMix64.mix(seed ^ UInt64(i) &* 0x9E37_79B9_7F4A_7C15)
        let key = Array("key-\(h % 400)".utf8)
        if (h >> 20) % 5 == 0 { return .delete(key, sequence: UInt64(i)) }
        return .put(key, Array("value \(i) ".utf8) + [UInt8](repeating: UInt8(truncatingIfNeeded: h >> 32), count: Int(h >> 40) % 40), sequence: UInt64(i))
    }

    /// What a tree holds after writes `1…n`.
    public static func model(through n: Int, seed: UInt64) -> [[UInt8]: [UInt8]] {
        var model: [[UInt8]: [UInt8]] = [:]
        if n > 0 {
            for i in 1...n {
                let e = entry(i, seed: seed)
                model[e.key] = e.isTombstone ? nil : e.value
            }
        }
        return model
    }

    /// The log position of a flush after write `n`: `n` as 8 bytes; empty (never flushed) is 0.
    public static func position(_ n: Int) -> [UInt8] {
        var w = ByteWriter()
        w.u64(UInt64(n))
        return w.bytes
    }

    public static func index(_ position: [UInt8]) -> Int {
        guard position.count == 8 else { return 0 }
        return position.enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
    }

    /// Opens the tree, replays the writes after its log position, then writes, flushing and merging every
    /// ``flushInterval`` writes, `writes` writes past the log position it found.
    public static func run(directory: String, seed: UInt64, writes: Int) throws {
        let tree = try LSMTree(directory: directory, configuration: configuration)
        defer { tree.close() }
        var i = index(tree.logPosition)
        let limit = i + writes
        while i < limit {
            i += 1
            try tree.apply(entry(i, seed: seed))
            if i % flushInterval == 0 {
                try tree.flush(logPosition: position(i))
                try tree.mergeUntilIdle()
            }
        }
    }
}
