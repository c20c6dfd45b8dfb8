import CloudletCore

/// One page of a database change feed (`changes/database`), built stream by stream: a private database's partitions,
/// and for a shared database its owners' partitions then the catalog (where access to shared zones changes). Each
/// stream's events come sorted by position (a partition LSN, a catalog version); the page takes them in order until
/// it holds `limit` zones, never stopping between two events of one position (a token can only say "after this
/// position"), so a page may pass `limit` by the rest of such a run. A zone is listed once per page.
struct DatabaseChangePage {
    let limit: Int
    private(set) var changed: [ZoneID] = []
    private(set) var deleted: [ZoneID] = []
    /// Whether the page ended before some stream's end (`moreComing`): later streams are not read.
    private(set) var moreComing = false
    private var listed: Set<ZoneID> = []

    init(limit: Int) { self.limit = limit }

    var count: Int { changed.count + deleted.count }

    /// Takes the events of one stream; returns the position the next page resumes after: that of the last event
    /// taken when the page filled up, else `end` (the stream's position now). After the page filled up, takes nothing
    /// and returns `since`.
    mutating func take(_ events: [(position: UInt64, zone: ZoneID, deleted: Bool)], since: UInt64, end: UInt64) -> UInt64 {
        guard !moreComing else { return since }
        var last: UInt64?
        for e in events {
            if count >= limit && e.position != last {
                moreComing = true
                return last ?? since
            }
            last = e.position
            guard listed.insert(e.zone).inserted else { continue }
            if e.deleted { deleted.append(e.zone) } else { changed.append(e.zone) }
        }
        return end
    }
}
