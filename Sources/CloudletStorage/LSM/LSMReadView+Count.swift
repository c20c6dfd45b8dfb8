/// Counting the live keys of a range without making an ``LSMEntry`` of each: what a count answered from an index
/// (`Database.count`) reads, through an ``LSMKeyScan`` (no allocation a step).
extension LSMReadView {
    /// How many live keys `range` holds (at most `limit`): keys whose newest entry is a value, tombstones and the
    /// older entries they hide left out — what ``scan(_:limit:)`` would return, counted.
    ///
    /// Every block read is checked as any read checks it (checksum, structure, keys increasing); a damaged run throws
    /// `corruption` naming it.
    public func count(_ range: LSMKeyRange = .all, limit: Int = .max) throws -> Int {
        let scan = try makeKeyScan(range)
        var n = 0
        while !scan.done, n < limit {
            n += 1
            try scan.advance()
        }
        return n
    }
}
