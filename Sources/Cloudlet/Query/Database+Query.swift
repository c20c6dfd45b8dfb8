import CloudletConcurrency
import CloudletCore

extension Database {
    /// The most records one ``query(_:zoneID:zoneWide:resultsLimit:desiredKeys:continuationMarker:)`` returns, and
    /// the default (CloudKit Web Services' limit).
    public static let maxQueryResults = CloudletLimits.queryResults

    /// Records of a type matching a predicate, in the query's order (CloudKit's `records/query`,
    /// `CKQueryOperation`), at most `resultsLimit` (default and maximum 200) per call.
    ///
    /// The planner uses the most selective ready index and evaluates the whole predicate on every candidate. In
    /// development, a query on a field without the index it needs adds the index to the schema just in time and
    /// scans until the index is built; in production such a query is refused naming the field (`Field 'x' is not
    /// marked queryable`), and one whose index is still being built gets `serviceUnavailable` (`TRY_AGAIN_LATER`).
    ///
    /// - Parameters:
    ///   - zoneID: the zone to search (default: the default zone), or
    ///   - zoneWide: search every zone of this database.
    ///   - desiredKeys: return only these fields (nil: all; empty: system fields only).
    ///   - continuationMarker: the ``QueryResults/cursor`` of the previous page; the page resumes right after that
    ///     page's last record.
    ///   - maxBytes: the page's byte budget (nil: none), counted as the matching records' stored sizes: the page
    ///     ends early, with a cursor, before the record that would pass it, and always carries at least one record.
    ///     No more than the budget plus one record is held in memory for the page.
    /// - Throws: `invalidArguments` for an unknown record type or field (production), a field without the needed
    ///   index (production), a malformed or foreign continuation marker, or an unsupported comparison; `zoneNotFound`.
    public func query(
        _ query: Query, zoneID: ZoneID, zoneWide: Bool, resultsLimit: Int?, desiredKeys: [String]?,
        continuationMarker: QueryCursor?
    ) async throws -> QueryResults {
        try await self.query(
            query, zoneID: zoneID, zoneWide: zoneWide, resultsLimit: resultsLimit, desiredKeys: desiredKeys,
            continuationMarker: continuationMarker, maxBytes: nil)
    }

    /// ``query(_:zoneID:zoneWide:resultsLimit:desiredKeys:continuationMarker:)`` within a byte budget.
    public func query(
        _ query: Query, zoneID: ZoneID = .default, zoneWide: Bool = false, resultsLimit: Int? = nil,
        desiredKeys: [String]? = nil, continuationMarker: QueryCursor? = nil, maxBytes: Int?
    ) async throws -> QueryResults {
        try authorize(.read)
        let limit = try Self.queryLimit(resultsLimit)
        let budget = try Self.byteBudget(maxBytes)
        let zones = try queryZones(zoneID: zoneID, zoneWide: zoneWide)
        let fingerprint = query.fingerprint(store: store.fingerprint, database: id, zone: zoneWide ? nil : zones[0].zoneName)
        var (pq, prepared) = try await prepare(query, addIndexes: true)
        let resumed = try continuationMarker.map {
            try $0.resume(query: fingerprint, keyCount: pq.order.keyCount, ranked: pq.order.ranked)
        }
        let after = resumed?.0
        try await rank(&pq, in: zones, stats: resumed?.1)
        let readable = readScope(query.recordType, in: security)
        if readable == .none {
            return QueryResults(
                records: [], cursor: nil,
                plan: QueryPlan(zones: [], notes: prepared + ["\(access) may not read records of type '\(query.recordType)'"]))
        }
        var notes = prepared
        var rows: [QueryRow] = []
        var plans: [QueryPlan.Zone] = []
        // Where the earliest zone page that ended at the byte budget stopped: later rows of other zones wait.
        var cut: QueryPosition?
        for z in zones {
            let run = try await run(pq, in: z, limit: limit + 1, after: after, budget: budget, readable: readable, notes: &notes)
            rows += run.rows
            if run.truncated, let last = run.rows.last?.position, cut.map({ pq.order.less(last, $0) }) ?? true { cut = last }
            plans.append(run.plan)
        }
        if zones.count > 1 { rows.sort { pq.order.less($0.position, $1.position) } }
        var more = rows.count > limit
        if more { rows.removeLast(rows.count - limit) }
        if let cut {
            more = true
            while let last = rows.last, pq.order.less(cut, last.position) { rows.removeLast() }
        }
        // Across zones, the budget holds for the page as a whole.
        var spent = 0
        for (i, row) in rows.enumerated() {
            if i > 0 && spent + row.cost > budget {
                rows.removeLast(rows.count - i)
                more = true
                break
            }
            spent += row.cost
        }
        var records = rows.map(\.record)
        if let desiredKeys {
            let keep = Set(desiredKeys)
            for i in records.indices { records[i].fields = records[i].fields.filter { keep.contains($0.key) } }
        }
        return QueryResults(
            records: records,
            cursor: more ? QueryCursor(query: fingerprint, after: rows[rows.count - 1].position, ranking: pq.rankScorer?.stats) : nil,
            plan: QueryPlan(zones: plans, notes: notes))
    }

    /// Gives a ranked query (``PreparedQuery/rankTerms``) its scorer: with `stats` (a continuation marker's), or with
    /// the statistics of `zones` now — for one zone whose terms are all indexed, all but the terms' frequencies, which
    /// its plan counts as it merges the postings (``PreparedQuery/pendingStats``).
    private func rank(_ pq: inout PreparedQuery, in zones: [ZoneKey], stats: RankStats?) async throws {
        guard let terms = pq.rankTerms else { return }
        if let stats { return pq.scorer = BM25(terms: terms, stats: stats) }
        // One zone whose terms are all indexed: its plan counts their frequencies as it merges their postings.
        if zones.count == 1 {
            // Counts and totals the partition state holds: no read, so no hop off the pool.
            let z = zones[0]
            let (partial, unindexed) = try QueryPlanner(state: store.partition(for: z).queryView(), zone: z, query: pq)
                .rankStatistics(terms, frequencies: false)
            if unindexed.isEmpty {
                pq.pendingStats = partial
                pq.rankedBy = RankedBy()
                return
            }
        }
        var sum = RankStats()
        for z in zones {
            let partition = store.partition(for: z)
            let query = pq
            let (zoneStats, unindexed, records) = try await ThreadBridge.offload {
                let planner = QueryPlanner(state: partition.queryView(), zone: z, query: query)
                let (stats, unindexed) = try planner.rankStatistics(terms)
                return (stats, unindexed, unindexed.isEmpty ? [] : try planner.typeRecords())
            }
            // A term whose index is not ready (development, while it builds) is counted in the records, so that the
            // ranking does not depend on how far a build got.
            var stats = zoneStats
            for chunk in stride(from: 0, to: records.count, by: Self.walkBatch.last) {
                let group = records[chunk..<min(chunk + Self.walkBatch.last, records.count)].map { (z, $0.name, $0.entry) }
                for read in try await partition.read(group) {
                    let r = try read.get()
                    var docs: [String: TextDocument] = [:]
                    for t in unindexed {
                        let d = docs[t.field] ?? TextDocument(IndexedField.value(t.field, in: r))
                        if docs[t.field] == nil {
                            docs[t.field] = d
                            stats.fields[t.field, default: TextTotals()].add(d, 1)
                        }
                        if d.posting(t.token) != nil { stats.frequencies[t, default: 0] += 1 }
                    }
                }
            }
            for t in unindexed where stats.frequencies[t] == nil { stats.frequencies[t] = 0 }
            for t in unindexed where stats.fields[t.field] == nil { stats.fields[t.field] = TextTotals() }
            sum.add(stats)
        }
        pq.scorer = BM25(terms: terms, stats: sum)
    }

    /// How many records match, without returning them (beyond CloudKit). A query without comparisons counts record
    /// names alone; otherwise the candidates an index finds are evaluated. Same schema rules as ``query(_:zoneID:zoneWide:resultsLimit:desiredKeys:continuationMarker:)``.
    public func count(_ query: Query, zoneID: ZoneID = .default, zoneWide: Bool = false) async throws -> Int {
        try authorize(.read)
        let zones = try queryZones(zoneID: zoneID, zoneWide: zoneWide)
        let readable = readScope(query.recordType, in: security)
        if readable == .none { return 0 }
        // A shared database sees only the records its shares cover: counted by the same walk as its query.
        if readable != .all || id.scope == .shared { return try await countReadable(query, zoneID: zoneID, zoneWide: zoneWide) }
        let (pq, prepared) = try await prepare(Query(recordType: query.recordType, predicate: query.predicate), addIndexes: true)
        var notes = prepared
        var n = 0
        for z in zones {
            if case .all = query.predicate {
                n += store.partition(for: z).queryView().indexes.recordCount(z, query.recordType)
                continue
            }
            n += try await run(pq, in: z, limit: nil, after: nil, budget: .max, readable: .all, notes: &notes).count
        }
        return n
    }

    /// ``count(_:zoneID:zoneWide:)`` for a caller who may read only some of the records (the public database's
    /// `_creator` READ): counts the pages a query returns it, so that the count agrees with the query.
    private func countReadable(_ query: Query, zoneID: ZoneID, zoneWide: Bool) async throws -> Int {
        let q = Query(recordType: query.recordType, predicate: query.predicate)
        var n = 0
        var cursor: QueryCursor?
        repeat {
            let page = try await self.query(
                q, zoneID: zoneID, zoneWide: zoneWide, resultsLimit: CloudletLimits.queryResults, desiredKeys: [],
                continuationMarker: cursor, maxBytes: nil)
            n += page.records.count
            cursor = page.cursor
        } while cursor != nil
        return n
    }

    /// How ``count(_:zoneID:zoneWide:)`` would run, without running it or changing the schema: for each zone, the
    /// index and its candidates — or, when an index answers the whole predicate exactly (a composite index's
    /// equalities and range, an equality on a number, timestamp or bytes field, a range of an ordered index), the
    /// count read off it without reading records (order `counted in the index, no record read`).
    public func explainCount(_ query: Query, zoneID: ZoneID = .default, zoneWide: Bool = false) async throws -> QueryPlan {
        try await explain(Query(recordType: query.recordType, predicate: query.predicate), zoneID: zoneID, zoneWide: zoneWide, limit: nil)
    }

    /// How ``query(_:zoneID:zoneWide:resultsLimit:desiredKeys:continuationMarker:)`` would run, without running it
    /// or changing the schema: for each zone, the index and the number of candidates it yields, and whether results
    /// would be sorted in memory.
    public func explain(
        _ query: Query, zoneID: ZoneID = .default, zoneWide: Bool = false, resultsLimit: Int? = nil
    ) async throws -> QueryPlan {
        try await explain(query, zoneID: zoneID, zoneWide: zoneWide, limit: try Self.queryLimit(resultsLimit) + 1)
    }

    /// Plans a page of `limit` (nil: a count) in every zone without running it.
    private func explain(_ query: Query, zoneID: ZoneID, zoneWide: Bool, limit: Int?) async throws -> QueryPlan {
        try authorize(.read)
        let zones = try queryZones(zoneID: zoneID, zoneWide: zoneWide)
        var (prepared, notes) = try await prepare(query, addIndexes: false)
        if limit != nil { try await rank(&prepared, in: zones, stats: nil) }
        let pq = prepared
        var plans: [QueryPlan.Zone] = []
        var allNotes = notes
        for z in zones {
            // Planning reads the key directory and the indexes (perhaps from disk): on a read view, outside the
            // partition's lock, off the cooperative pool.
            let partition = store.partition(for: z)
            let (plan, unready) = try await ThreadBridge.offload {
                let planner = QueryPlanner(state: partition.queryView(), zone: z, query: pq)
                return (try planner.plan(limit: limit, after: nil, explaining: true).1, planner.unready())
            }
            for f in unready { allNotes.append("the index on '\(f)' is still being built in zone '\(z.zoneName)'") }
            plans.append(plan)
        }
        return QueryPlan(zones: plans, notes: allNotes)
    }

    static func queryLimit(_ requested: Int?) throws -> Int {
        guard let requested else { return maxQueryResults }
        guard requested >= 1 else { throw CloudletError.invalid("resultsLimit must be at least 1, not \(requested)") }
        return min(requested, maxQueryResults)
    }

    /// The zones a query searches, sorted by name.
    func queryZones(zoneID: ZoneID, zoneWide: Bool) throws -> [ZoneKey] {
        guard zoneWide else {
            let k = try key(zoneID)
            try requireZone(k)
            return [k]
        }
        if id.scope == .shared { return sharedZoneKeys().sorted { NameOrder.compare($0.zoneName, $1.zoneName) < 0 } }
        var keys: [ZoneKey] = [ZoneKey(database: id, zoneName: ZoneID.defaultZoneName)]
        for p in store.partitions {
            p.state.withLock { st in
                for k in st.zoneKeys(of: id) where k.zoneName != ZoneID.defaultZoneName { keys.append(k) }
            }
        }
        return keys.sorted { NameOrder.compare($0.zoneName, $1.zoneName) < 0 }
    }

    // MARK: - Running

    /// Records read per lock acquisition when walking an index in order (grows from the first to the last value).
    static let walkBatch = (first: 32, last: 1024)

    /// A walk's first batch: the page (its records and the one more that says whether more follow), so that a page
    /// whose candidates all match is one scan of the index and one look-up of each entry it returns — batches of
    /// 32, 64, 128 made a page of 100 three scans and ~120 entry look-ups it did not use, a page of 10 22 of them;
    /// ``walkBatch``'s first for a count.
    static func firstWalkBatch(_ limit: Int?) -> Int { min(limit ?? walkBatch.first, walkBatch.last) }

    /// Sorted candidates whose entries are looked up together (``ZoneExecution/keyed(_:view:)``).
    static let keyedChunk = 128

    /// How many of a walk's or a keyed plan's candidates are read together (``Partition/read(_:)``: one look in the
    /// record cache, one read off the cooperative pool for the rest, record blocks near each other in one read): as
    /// many as the page still needs — fewer candidates than that cannot fill it, and reading more would read
    /// records the page may not use — and at most a batch of the walk's for a count.
    static func readGroup(_ limit: Int?, rows: Int) -> Int {
        guard let limit else { return walkBatch.last }
        return max(limit - rows, 1)
    }

    /// One result of a query: the record, where it sorts, and what it costs the page's byte budget.
    struct QueryRow {
        var record: Record
        var position: QueryPosition
        var cost: Int
    }

    /// Plans and runs `pq` in one zone: up to `limit` matches after `after` in order (all of them when `limit` is
    /// nil, for a count), ending early (`truncated`) before the match that would take the rows' costs past
    /// `budget` (at least one row). In production an index the query needs that is not ready is an error; in
    /// development the planner does without it and a note says so.
    private func run(
        _ pq: PreparedQuery, in key: ZoneKey, limit: Int?, after: QueryPosition?, budget: Int, readable: ReadScope,
        notes: inout [String]
    ) async throws -> (rows: [QueryRow], count: Int, plan: QueryPlan.Zone, truncated: Bool) {
        // Records the caller may not read are not matches (the public database's roles; ``count(_:zoneID:zoneWide:)``
        // never asks for an index count when some are hidden).
        func visible(_ r: Record) -> Bool { pq.matches(r) && readable.admits(creator: r.created?.userRecordName) }
        // In a shared database, only the records the zone's shares cover (by name or parent chain) are matches: an
        // asynchronous check (it may read ancestors) made only there.
        let shared = sharedZone(key)
        var memo: [String: Share.Permission] = [:]
        func hidden(_ r: Record) async throws -> Bool {
            guard let shared, !shared.covers(r.recordName) else { return false }
            return try await sharedPermission(shared, name: r.recordName, parent: r.parent?.recordName, memo: &memo) == .none
        }
        let partition = store.partition(for: key)
        let query = pq
        // Planning and walking an index read the key directory and the indexes (perhaps from disk): off the
        // cooperative pool, as record reads are (``Partition/read(_:_:_:)``).
        let (execution, planned, unready) = try await ThreadBridge.offload {
            let planner = QueryPlanner(state: partition.queryView(), zone: key, query: query)
            let (execution, planned) = try planner.plan(limit: limit, after: after)
            return (execution, planned, planner.unready())
        }
        if let field = unready.first {
            guard id.environment == .development else {
                throw CloudletError(
                    .serviceUnavailable,
                    "the index on field '\(field)' of record type '\(pq.query.recordType)' is still being built; try again shortly")
            }
            for f in unready where !notes.contains(where: { $0.contains("'\(f)'") && $0.contains("being built") }) {
                notes.append("the index on '\(f)' is still being built; the query scanned meanwhile (development)")
            }
        }
        var plan = planned
        var rows: [QueryRow] = []
        var spent = 0
        var truncated = false
        /// Whether a match of `cost` bytes still fits the budget (the first always does).
        func fits(_ cost: Int) -> Bool {
            if !rows.isEmpty && spent + cost > budget {
                truncated = true
                return false
            }
            spent += cost
            return true
        }
        var examined = 0
        var matched = 0
        /// Reads `group` (candidates in the query's order) together — one look in the record cache, one hop off the
        /// cooperative pool for the misses, nearby blocks fetched together — and adds each that matches and fits to
        /// the page; false once the page is full (or its budget spent).
        func take(_ group: [(name: String, entry: RecordEntry, position: QueryPosition)]) async throws -> Bool {
            let records = try await partition.read(group.map { (key, $0.name, $0.entry) })
            for (item, read) in zip(group, records) {
                let r = try read.get()
                examined += 1
                guard visible(r) else { continue }
                if shared != nil, try await hidden(r) { continue }
                let cost = item.entry.pageCost(item.name)
                guard fits(cost) else { return false }
                rows.append(QueryRow(record: r, position: item.position, cost: cost))
                if rows.count == limit { return false }
            }
            return true
        }
        /// Takes `items` in groups of what the page still lacks (``readGroup(_:rows:)``); false once the page is full.
        func takeInGroups(_ items: [(name: String, entry: RecordEntry, position: QueryPosition)]) async throws -> Bool {
            var next = 0
            while next < items.count {
                let group = Array(items[next..<min(items.count, next + Self.readGroup(limit, rows: rows.count))])
                next += group.count
                guard try await take(group) else { return false }
            }
            return true
        }
        switch execution {
        case .empty:
            break
        case .counted(let n):
            matched = n
        case .walk(let w):
            var from: IndexEntry?
            var batch = Self.firstWalkBatch(limit)
            walking: repeat {
                let start = from
                let size = batch
                let (items, last) = try await ThreadBridge.offload {
                    try QueryPlanner(state: partition.queryView(), zone: key, query: query).walkBatch(w, from: start, after: after, max: size)
                }
                from = last
                batch = min(batch * 2, Self.walkBatch.last)
                guard try await takeInGroups(items) else { break walking }
            } while from != nil
        case .keyed(var candidates, let view, let sorted):
            if !sorted { candidates.sort { pq.order.less($0.position, $1.position) } }
            // Entries are looked up in the plan's view (off the pool: perhaps from disk) a chunk at a time, as reading
            // gets to them.
            var next = 0
            reading: while next < candidates.count {
                let chunk = Array(candidates[next..<min(next + Self.keyedChunk, candidates.count)])
                next += chunk.count
                let entries = try await ThreadBridge.offload { try chunk.map { try view.cachedEntry(key, $0.name) } }
                let live = zip(chunk, entries).compactMap { c, e in e.flatMap { $0.deleted ? nil : (c.name, $0, c.position) } }
                guard try await takeInGroups(live) else { break reading }
            }
        case .nearest(let n):
            // Records placed by their kept locations, nearest first, not read yet, each with the read view that
            // placed it (its entry is looked up there, once it is read); a record is read once no cell left to visit
            // can hold a nearer one (the next cell's lower bound is past its distance: a tie could still come before
            // it by name).
            var pending: [(name: String, position: QueryPosition, view: Int)] = []
            var views: [PartitionReadView] = []
            var visited = 0
            var step = 4
            var scanned = 0
            reading: while true {
                let bound = visited < n.cells.count ? SortKey.distance(n.cells[visited].lowerKm) : nil
                let ready = bound.map { b in pending.firstIndex { SortKey.compare($0.position.keys[0], b) >= 0 } ?? pending.count } ?? pending.count
                var taken = 0
                while taken < ready {
                    let chunk = Array(pending[taken..<min(ready, taken + max(16, (limit ?? Self.keyedChunk) - rows.count))])
                    let placedIn = views
                    let entries = try await ThreadBridge.offload { try chunk.map { try placedIn[$0.view].cachedEntry(key, $0.name) } }
                    taken += chunk.count
                    let live = zip(chunk, entries).compactMap { c, e in e.flatMap { $0.deleted ? nil : (c.name, $0, c.position) } }
                    guard try await takeInGroups(live) else { break reading }
                }
                pending.removeFirst(taken)
                guard visited < n.cells.count else { break }
                let cells = visited..<min(visited + step, n.cells.count)
                visited = cells.upperBound
                step = min(step * 2, 16)
                let (placed, unplaced, view) = try await ThreadBridge.offload {
                    try QueryPlanner(state: partition.queryView(), zone: key, query: query).nearestBatch(n, cells, after: after)
                }
                views.append(view)
                scanned += placed.count + unplaced.count
                pending += placed.map { ($0.name, $0.position, views.count - 1) }
                for u in unplaced {
                    let p = pq.position(try await partition.read(key, u.name, u.entry), zoneName: key.zoneName)
                    if let after, pq.order.compare(p, after) <= 0 { continue }
                    pending.append((u.name, p, views.count - 1))
                }
                pending.sort { pq.order.less($0.position, $1.position) }
            }
            plan.candidates = scanned
        case .readAll(let candidates):
            // Matching records are kept while their total stays within the budget (all of them without one); past
            // it only their positions are, so memory stays bounded, and those of the page are read again (usually
            // from the cache) once the order is known.
            var matches: [(name: String, entry: RecordEntry, position: QueryPosition, record: Record?)] = []
            var held = 0
            for c in candidates {
                let r = try await partition.read(key, c.name, c.entry)
                examined += 1
                guard visible(r) else { continue }
                if shared != nil, try await hidden(r) { continue }
                guard limit != nil else {
                    matched += 1
                    continue
                }
                let p = pq.position(r, zoneName: key.zoneName)
                if let after, pq.order.compare(p, after) <= 0 { continue }
                let cost = c.entry.pageCost(c.name)
                let keep = held <= budget - min(cost, budget)
                if keep { held += cost }
                matches.append((c.name, c.entry, p, keep ? r : nil))
            }
            if let limit {
                matches.sort { pq.order.less($0.position, $1.position) }
                for m in matches.prefix(limit) {
                    let cost = m.entry.pageCost(m.name)
                    guard fits(cost) else { break }
                    var record = m.record
                    if record == nil { record = try await partition.read(key, m.name, m.entry) }
                    guard let record else { continue }
                    rows.append(QueryRow(record: record, position: m.position, cost: cost))
                }
            }
        }
        if limit != nil { matched = rows.count }
        if case .walk(let w) = execution, w.readsOnlyCandidates { plan.candidates = examined }
        plan.examined = examined
        plan.matched = matched
        return (rows, matched, plan, truncated)
    }
}
