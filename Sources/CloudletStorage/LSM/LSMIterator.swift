/// A cursor over entries in increasing key order: a run, a memtable, or several of them merged. After
/// ``seek(_:)`` or ``seekToFirst()`` it stands on an entry (``current``) or past the end (nil). Errors (a corrupt
/// block) are thrown, never skipped.
public protocol LSMIterator: AnyObject {
    /// The entry at the position; nil past the end (and before the first seek).
    var current: LSMEntry? { get }
    /// Positions at the first entry whose key is at least `key`.
    func seek(_ key: [UInt8]) throws
    /// Positions at the first entry.
    func seekToFirst() throws
    /// Moves to the next entry (past the end after the last).
    func advance() throws
}

/// A range of keys: from `lower` (inclusive; nil: from the first) up to `upper` (exclusive; nil: to the last).
public struct LSMKeyRange: Sendable, Hashable {
    public var lower: [UInt8]?
    public var upper: [UInt8]?

    public init(lower: [UInt8]? = nil, upper: [UInt8]? = nil) {
        self.lower = lower
        self.upper = upper
    }

    /// Every key.
    public static let all = LSMKeyRange()

    public func contains(_ key: [UInt8]) -> Bool {
        if let lower, LSMKey.compare(key, lower) < 0 { return false }
        if let upper, LSMKey.compare(key, upper) >= 0 { return false }
        return true
    }
}

extension LSMIterator {
    /// Positions at the first entry of `range` (its lower bound, or the first entry).
    public func seek(to range: LSMKeyRange) throws {
        if let lower = range.lower { try seek(lower) } else { try seekToFirst() }
    }

    /// Every entry in `range`, in key order (at most `limit`).
    public func entries(in range: LSMKeyRange = .all, limit: Int = .max) throws -> [LSMEntry] {
        var out: [LSMEntry] = []
        try seek(to: range)
        while out.count < limit, let entry = current {
            if let upper = range.upper, LSMKey.compare(entry.key, upper) >= 0 { break }
            out.append(entry)
            try advance()
        }
        return out
    }
}
