import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Full-text ranking: a token search without sort descriptors comes best first by BM25, scored from the postings'
/// values (``TextPosting``) and the index's totals, with statistics frozen in the continuation marker; the totals
/// follow every change, survive a reopen, and are derived for a store flushed before they existed.
@Suite struct RankingTests {
    static let t = RankTerm(field: "title", token: "swift")

    @Test func bm25WeighsATermByItsRarityItsFrequencyAndTheFieldsLength() {
        // 4 records, the token in 1, the field 3 tokens long on average: idf = ln(1 + (4 − 1 + 0.5) / (1 + 0.5)).
        let bm25 = BM25(
            terms: [Self.t], stats: RankStats(records: 4, fields: ["title": TextTotals(documents: 4, tokens: 12)], frequencies: [Self.t: 1]))
        let idf = log(1 + 3.5 / 1.5)
        // tf 2 in an average-length field: 2 · 2.2 / (2 + 1.2 · (0.25 + 0.75 · 3/3)) = 4.4 / 3.2.
        #expect(abs(bm25.weight(0, TextPosting(frequency: 2, length: 3)) - idf * 4.4 / 3.2) < 1e-12)
        // Twice as long: 4.4 / (2 + 1.2 · (0.25 + 1.5)) = 4.4 / 4.1.
        #expect(abs(bm25.weight(0, TextPosting(frequency: 2, length: 6)) - idf * 4.4 / 4.1) < 1e-12)
        // A token in every record still scores, a little: idf ln(1 + 0.5 / 4.5).
        let common = BM25(
            terms: [Self.t], stats: RankStats(records: 4, fields: ["title": TextTotals(documents: 4, tokens: 12)], frequencies: [Self.t: 4]))
        #expect(abs(common.weight(0, TextPosting(frequency: 1, length: 3)) - log(1 + 0.5 / 4.5)) < 1e-12)
        // Higher scores sort first.
        #expect(SortKey.compare(BM25.key(2.5), BM25.key(1.25)) < 0 && SortKey.compare(BM25.key(0.1), BM25.key(0)) < 0)
    }

    @Test func aFieldsPostingsCountRepeatsStopWordsAndListMembers() throws {
        let d = TextDocument(.string("The swift Swift log, a swift café"))
        #expect(d.length == 5, "the and a are stop words")
        #expect(d.posting("swift") == TextPosting(frequency: 3, length: 5))
        #expect(d.posting("cafe") == TextPosting(frequency: 1, length: 5), "folded as the tokenizer folds")
        #expect(d.posting("the") == nil)
        let list = TextDocument(.list(.string, [.string("red fox"), .string("Red")]))
        #expect(list.posting("red") == TextPosting(frequency: 2, length: 3))
        #expect(TextDocument(.int64(3)) == .empty && TextDocument(nil) == .empty)
        #expect(try TextPosting.decode(TextPosting(frequency: 2, length: 9).encoded) == TextPosting(frequency: 2, length: 9))
        #expect(try TextPosting.decode([]) == nil, "a key written before postings had values")
    }

    /// A posting decoded where it lies (a slice of a run's block) reads its two varints and nothing else.
    @Test func aPostingDecodesInPlaceAndRefusesWhatIsMalformed() throws {
        let big = TextPosting(frequency: 300, length: Int(Int32.max))
        let block: [UInt8] = [9, 9] + big.encoded + [7]
        #expect(try TextPosting.decode(block[2..<(block.count - 1)]) == big)
        for bad: [UInt8] in [
            [1], [2, 1], [1, 1, 0], [0, 3], [0x80], [1] + [UInt8](repeating: 0xFF, count: 9) + [1],
        ] {
            #expect(throws: CloudletError.self, "\(bad)") { try TextPosting.decode(bad[...]) }
        }
    }

    func note(_ name: String, _ title: String, zone: ZoneID = .default) -> Record {
        var r = Record(recordType: "Note", recordName: name, zoneID: zone)
        r["title"] = .string(title)
        return r
    }

    /// A store whose Note type has `title` SEARCHABLE (built), with `zones` made and `notes` saved.
    func store(_ dir: TempDir, _ notes: [Record], zones: [ZoneID] = []) async throws -> (CloudletStore, Database) {
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        for z in zones { try await db.createZone(z) }
        _ = try await db.modify(notes.map { .create($0) })
        try await store.container(testContainer).addIndexes(.searchable, recordType: "Note", field: "title")
        await store.waitForIndexBuilds()
        return (store, db)
    }

    /// `title CONTAINS_ANY_TOKENS words` on notes.
    static func search(_ words: String) -> Query {
        Query(recordType: "Note", predicate: .comparison(Comparison("title", .containsAnyTokens, .string(words))))
    }

    static let fillers = (0..<12).map { "coffee log \($0)" }

    @Test func aTokenSearchWithoutSortsComesBestFirst() async throws {
        let dir = TempDir("rank-order")
        let notes = [
            note("a", "swift database log"), note("b", "swift swift swift"), note("c", "database log"),
            note("d", "swift coffee fox brown quick log database"), note("e", "Swift"),
        ] + Self.fillers.enumerated().map { note("f\($0.offset)", $0.element) }
        let (store, db) = try await store(dir, notes)
        // b: three times in three tokens; e: once, in one; a: once in three; d: once in seven.
        let q = Self.search("swift")
        let page = try await db.query(q)
        #expect(page.records.map(\.recordName) == ["b", "e", "a", "d"])
        #expect(page.plan.zones[0].order.hasPrefix("ranked by BM25 from 4 postings (no record read)"), "\(page.plan)")
        #expect(page.plan.zones[0].examined == 4)
        // `self CONTAINS` ranks the same way; a sort replaces the ranking.
        #expect(try await db.query(try Query(recordType: "Note", format: "self CONTAINS 'swift'")).records.map(\.recordName) == ["b", "e", "a", "d"])
        let byName = try await db.query(Query(recordType: "Note", predicate: q.predicate, sortDescriptors: [.ascending("recordName")]))
        #expect(byName.records.map(\.recordName) == ["a", "b", "d", "e"])
        // A page reads only its records: two of them, and the one after that says more follow.
        let two = try await db.query(q, resultsLimit: 2)
        #expect(two.records.map(\.recordName) == ["b", "e"] && two.cursor != nil)
        #expect((two.plan.zones[0].examined ?? .max) <= 3, "\(two.plan)")
        let rest = try await db.query(q, resultsLimit: 2, continuationMarker: two.cursor)
        #expect(rest.records.map(\.recordName) == ["a", "d"] && rest.cursor == nil)
        // Two tokens: the short record with both comes first (the long one with both still trails "swift swift swift").
        let both = try await db.query(Self.search("swift database"))
        #expect(both.records.first?.recordName == "a", "\(both.records.map(\.recordName))")
        #expect(Set(both.records.map(\.recordName)) == ["a", "b", "c", "d", "e"])
        try await store.close()
    }

    @Test func aPrefixTermMatchesEveryTokenItBeginsAndScoresTheirOccurrencesTogether() async throws {
        let dir = TempDir("rank-prefix")
        let notes = [
            note("p1", "swim swimming swift"), note("p2", "swiss cheese"), note("p3", "sweden switch board meeting"),
            note("p4", "a swim"), note("p5", "apple pie"), note("p6", "Swimming pool"),
        ] + Self.fillers.enumerated().map { note("f\($0.offset)", $0.element) }
        let (store, db) = try await store(dir, notes)
        // p1 has three tokens beginning "swi" in three; p4 one in one; p2 and p6 one in two; p3 one in four.
        let q = Self.search("Swi*")
        let page = try await db.query(q)
        #expect(page.records.map(\.recordName) == ["p1", "p4", "p2", "p6", "p3"])
        #expect(page.plan.zones[0].order.hasPrefix("ranked by BM25 from"), "\(page.plan)")
        let model = try #require(modelRanking(q.predicate, sorts: [], searchable: ["title"], corpus: notes))
        #expect(model.stats.frequencies[RankTerm(field: "title", token: "swi*")] == 5, "each record counts once")
        #expect(model.score(notes[0]) > model.score(notes[3]))
        // With a whole token, and with every term required; a stop word's prefix still finds the words it begins.
        let mixedQuery = Self.search("swift swi*")
        let mixedModel = try #require(modelRanking(mixedQuery.predicate, sorts: [], searchable: ["title"], corpus: notes))
        let mixed = try await db.query(mixedQuery)
        #expect(mixed.records.map(\.recordName) == notes.filter { mixedModel.score($0) > 0 }.sorted { rankedLess($0, $1, mixedModel) }.map(\.recordName))
        #expect(mixed.records.first?.recordName == "p1")
        let both = Query(recordType: "Note", predicate: .comparison(Comparison("title", .containsAllTokens, "swi* pool")))
        #expect(try await db.query(both).records.map(\.recordName) == ["p6"])
        #expect(try await db.query(Self.search("a*")).records.map(\.recordName) == ["p5"])
        #expect(try await db.query(Self.search("zzz*")).records.isEmpty)
        // Pages, ranked and by name (the names come gathered from the postings of every token the prefix begins).
        for sorts in [[], [QuerySort.ascending("recordName")]] {
            let sorted = Query(recordType: "Note", predicate: q.predicate, sortDescriptors: sorts)
            var got: [String] = []
            var cursor: QueryCursor?
            var pages = 0
            repeat {
                let p = try await db.query(sorted, resultsLimit: 2, continuationMarker: cursor)
                got += p.records.map(\.recordName)
                cursor = p.cursor
                pages += 1
            } while cursor != nil && pages < 10
            #expect(got == (sorts.isEmpty ? ["p1", "p4", "p2", "p6", "p3"] : ["p1", "p2", "p3", "p4", "p6"]), "\(sorts)")
        }
        try await store.close()
    }

    @Test func theMarkerKeepsTheFirstPagesStatisticsSoPagesNeitherRepeatNorSkipWhileRecordsChange() async throws {
        let dir = TempDir("rank-pages")
        // Records with "alpha" only and with "beta" only, interleaved in score; more alphas saved between the pages
        // make alpha commoner (its idf falls), which would move the remaining betas ahead of the page already read.
        var notes: [Record] = []
        for i in 0..<20 { notes.append(note(String(format: "a%02d", i), "alpha " + Array(repeating: "x", count: i % 5).joined(separator: " "))) }
        for i in 0..<20 { notes.append(note(String(format: "b%02d", i), "beta " + Array(repeating: "y", count: i % 5).joined(separator: " "))) }
        notes += (0..<60).map { note("z\($0)", "filler words here") }
        let (store, db) = try await store(dir, notes)
        let q = Self.search("alpha beta")
        let ranking = try #require(
            modelRanking(q.predicate, sorts: [], searchable: ["title"], corpus: try await db.query(Query(recordType: "Note", predicate: .all), resultsLimit: 200).records))
        var got: [String] = []
        var cursor: QueryCursor?
        var added = 0
        var pages = 0
        repeat {
            pages += 1
            let page = try await db.query(q, resultsLimit: 6, continuationMarker: cursor)
            got += page.records.map(\.recordName)
            cursor = page.cursor
            _ = try await db.modify((0..<40).map { _ in
                added += 1
                return .create(note("n\(added)", "alpha alpha"))
            })
        } while cursor != nil && pages < 30
        #expect(cursor == nil, "paging did not end")
        let original = Set(notes.filter { ranking.score($0) > 0 }.map(\.recordName))
        #expect(Set(got).count == got.count, "a record came twice")
        #expect(original.isSubset(of: Set(got)), "missing: \(original.subtracting(got).sorted())")
        let byName = Dictionary(uniqueKeysWithValues: notes.map { ($0.recordName, $0) })
        let firstStats = got.compactMap { byName[$0] }
        #expect(zip(firstStats, firstStats.dropFirst()).allSatisfy { rankedLess($0, $1, ranking) }, "\(got)")
        // The new records saved after the first page all tie at one score, above every original one: none came.
        #expect(got.allSatisfy { !$0.hasPrefix("n") })
        try await store.close()
    }

    @Test func aMarkerWhoseStatisticsDoNotFitIsABadRequestNotATrap() async throws {
        let dir = TempDir("rank-forged")
        let (store, db) = try await store(dir, (0..<6).map { note("a\($0)", "swift log") })
        let q = Self.search("swift")
        let marker = try #require(try await db.query(q, resultsLimit: 2).cursor)
        // The marker as the server wrote it, re-sealed with statistics a client made up: counts beyond Int.max.
        let (sealed, position) = try Self.statistics(in: marker)
        func forged(_ stats: (inout ByteWriter) -> Void) -> QueryCursor {
            var w = ByteWriter(capacity: 64)
            w.raw(Array(sealed[..<position]))
            stats(&w)
            w.u32(CRC32C.checksum(w.bytes))
            return QueryCursor(marker: Base64.encode(w.bytes))
        }
        let huge = forged { w in
            w.varint(UInt64.max)
            w.varint(0)
            w.varint(0)
        }
        let e = await expectError(.invalidArguments) { try await db.query(q, continuationMarker: huge) }
        #expect(e?.message.contains("malformed") == true, "\(String(describing: e))")
        // The same marker with statistics that fit still reads the next page.
        let fitting = forged { w in
            RankStats(records: 6, fields: ["title": TextTotals(documents: 6, tokens: 12)], frequencies: [Self.t: 6]).encode(into: &w)
        }
        #expect(try await db.query(q, resultsLimit: 2, continuationMarker: fitting).records.count == 2)
        try await store.close()
    }

    /// A ranked query's marker, unsealed, and where the statistics it carries start (``QueryCursor``'s layout).
    static func statistics(in marker: QueryCursor) throws -> (bytes: [UInt8], at: Int) {
        let sealed = try #require(Base64.decode(marker.marker))
        var r = ByteReader(Array(sealed.dropLast(4)), what: "test")
        _ = (try r.u8(), try r.u64())
        for _ in 0..<(try r.length()) { _ = try r.bytes() }
        _ = (try r.string(), try r.string())
        return (Array(sealed.dropLast(4)), sealed.count - 4 - r.remaining)
    }

    @Test func aPrefixCountsEachRecordOnceInTheStatisticsOfAZoneWideQuery() async throws {
        let dir = TempDir("rank-prefix-zones")
        let z = ZoneID(zoneName: "Z")
        // Seven keys under "swi…" in four records; "cheese" in two; a "p2" in each zone.
        let notes = [
            note("p1", "swim swimming swift"), note("p2", "swiss cheese"), note("p3", "pool"),
            note("q1", "switch swiss", zone: z), note("q2", "cheese board", zone: z), note("p2", "swiss roll", zone: z),
        ]
        let (store, db) = try await store(dir, notes, zones: [z])
        let q = Self.search("swi* cheese")
        let model = try #require(modelRanking(q.predicate, sorts: [], searchable: ["title"], corpus: notes))
        let first = try await db.query(q, zoneWide: true, resultsLimit: 1)
        let (bytes, at) = try Self.statistics(in: try #require(first.cursor))
        var r = ByteReader(bytes, from: at, what: "test")
        let stats = try RankStats.decode(&r)
        #expect(stats == model.stats, "\(stats) vs \(model.stats)")
        #expect(stats.frequencies[RankTerm(field: "title", token: "swi*")] == 4)
        var got = first.records.map(\.recordName)
        var cursor = first.cursor
        while let c = cursor, got.count < 10 {
            let page = try await db.query(q, zoneWide: true, resultsLimit: 1, continuationMarker: c)
            got += page.records.map(\.recordName)
            cursor = page.cursor
        }
        #expect(got == notes.filter { model.score($0) > 0 }.sorted { rankedLess($0, $1, model) }.map(\.recordName))
        // By name, a page at a time: the names a prefix gathers resume at the marker's, which the other zone has too.
        let byName = Query(recordType: "Note", predicate: q.predicate, sortDescriptors: [.ascending("recordName")])
        var named: [String] = []
        cursor = nil
        repeat {
            let page = try await db.query(byName, zoneWide: true, resultsLimit: 1, continuationMarker: cursor)
            named += page.records.map { "\($0.recordName)@\($0.id.zoneID.zoneName)" }
            cursor = page.cursor
        } while cursor != nil && named.count < 10
        #expect(named == ["p1@_defaultZone", "p2@Z", "p2@_defaultZone", "q1@Z", "q2@Z"], "\(named)")
        try await store.close()
    }

    /// The title totals, counted in `records`.
    func totals(_ records: [Record]) -> TextTotals {
        var t = TextTotals()
        for r in records { t.add(TextDocument(r["title"]), 1) }
        return t
    }

    func keptTotals(_ store: CloudletStore, zone: ZoneID = .default) throws -> TextTotals? {
        let z = try store.container(testContainer).privateDatabase(user: "u").key(zone)
        let d = IndexDefinition(schema: SchemaKey(zone: z), recordType: "Note", field: "title", kind: .text)
        return store.partition(for: z).state.withLock { $0.indexes.textTotals(d, zone: z) }
    }

    @Test func theTotalsFollowEveryChangeSurviveAReopenAndVerifyChecksThem() async throws {
        let dir = TempDir("rank-totals")
        var notes = (0..<30).map { note("n\($0)", Array(repeating: "word\($0 % 4)", count: 1 + $0 % 3).joined(separator: " ")) }
        notes.append(note("stop", "the a and"))  // no token: not counted
        var (store, db) = try await store(dir, notes)
        #expect(try keptTotals(store) == totals(notes))
        #expect(try keptTotals(store)?.documents == 30)
        // Updates (longer, shorter, to nothing), deletes, and new records.
        var byName = Dictionary(uniqueKeysWithValues: notes.map { ($0.recordName, $0) })
        var ops: [RecordOperation] = []
        for i in 0..<6 {
            var r = byName["n\(i)"]!
            r["title"] = i % 3 == 0 ? nil : .string(String(repeating: "long ", count: i + 2))
            ops.append(.forceReplace(r))
        }
        for i in 6..<10 { ops.append(.forceDelete(byName["n\(i)"]!.id)) }
        for i in 30..<35 { ops.append(.create(note("n\(i)", "fresh words \(i)"))) }
        for (op, result) in zip(ops, try await db.modify(ops)) { byName[op.recordID.recordName] = result.record }
        #expect(try keptTotals(store) == totals(Array(byName.values)))
        // Across a clean reopen and a replay of the log.
        try await store.close()
        store = try await openStore(dir)
        db = try store.container(testContainer).privateDatabase(user: "u")
        #expect(try keptTotals(store) == totals(Array(byName.values)))
        try await store.close()
        let clean = try await tool("verify", "--data", dir.sub("store"), "--deep")
        #expect(clean.code == 0, "\(clean)")

        // A posting with the wrong frequency, and a record's keys lost (the totals still count it): both named.
        try rewriteTextKeys(dir) { key, name, token in
            if name == "n20" { return TextPosting(frequency: 2, length: 9).encoded }
            return name == "n21" ? nil : key
        }
        let damaged = try await tool("verify", "--data", dir.sub("store"), "--deep")
        #expect(damaged.code != 0)
        #expect(damaged.stdout.contains("posting of 'n20' under 'word0'"), "\(damaged)")
        #expect(damaged.stdout.contains("its keys hold"), "\(damaged)")
    }

    /// Rewrites partition 0's full-text keys: `change(value, name, token)` gives each key's new value, nil to delete
    /// it; and its flushed state as `state` encodes it, if given.
    func rewriteTextKeys(
        _ dir: TempDir, state encode: ((PartitionState) throws -> [UInt8])? = nil, _ change: ([UInt8], String, String) -> [UInt8]?
    ) throws {
        try rewritePartitionDirectory(dir.sub("store")) { state, memtable in
            for (d, info) in state.indexes.definitions where d.kind == .text {
                for z in state.keys.zoneKeys where SchemaKey(zone: z) == d.schema {
                    let subspace = IndexKeyspace.Subspace(zone: DirectoryKey.zone(z), id: info.id)
                    var c = d.maintainer.scan(state.keys, subspace, .all)
                    while let (e, value) = try c.nextWithValue() {
                        let key = subspace.key(e.valueKey, e.name)
                        switch change(value, e.name, String(decoding: e.valueKey, as: UTF8.self)) {
                        case nil: memtable.delete(key, sequence: state.lastLSN)
                        case let v? where v != value: memtable.put(key, v, sequence: state.lastLSN)
                        default: break
                        }
                    }
                }
            }
            if let encode { memtable.put(DirectoryKey.state, try encode(state), sequence: state.lastLSN) }
        }
    }

    @Test func aStoreFlushedBeforePostingsHadValuesGetsThemAndItsTotalsOnOpen() async throws {
        let dir = TempDir("rank-migrate")
        let notes = (0..<40).map { note("n\($0)", Array(repeating: "tok\($0 % 5)", count: 1 + $0 % 4).joined(separator: " ") + " end") }
        var (store, db) = try await store(dir, notes)
        let before = try store.partitions[0].state.withLock { try $0.indexDump() }
        let expected = try keptTotals(store)
        #expect(expected == totals(notes))
        try await store.close()

        // Rewrite the directory as version 7 left it: the text keys without values, the state without totals.
        var emptied = 0
        try rewriteTextKeys(dir, state: Self.version7) { value, _, _ in
            #expect(!value.isEmpty)
            emptied += 1
            return []
        }
        #expect(emptied == 40 * 2)

        store = try await openStore(dir)
        #expect(try store.partitions[0].state.withLock { try $0.indexDump() } == before)
        #expect(try keptTotals(store) == expected)
        #expect(try SecondaryIndexTests.flushedState(store).first == PartitionState.stateVersion, "the migrated postings were flushed at open")
        db = try store.container(testContainer).privateDatabase(user: "u")
        let ranked = try await db.query(Self.search("tok1"))
        #expect(ranked.records.map(\.recordName) == (0..<40).filter { $0 % 5 == 1 }.map { "n\($0)" }.sorted { a, b in
            // tok1 fills more of a longer title: more repeats first.
            let (x, y) = (Int(a.dropFirst())! % 4, Int(b.dropFirst())! % 4)
            return x != y ? x > y : a < b
        })
        try await store.close()
        let clean = try await tool("verify", "--data", dir.sub("store"), "--deep")
        #expect(clean.code == 0, "\(clean)")
    }

    /// `state` encoded as flushed-state version 7: this version's encoding without the full-text totals (its last
    /// section), under version byte 7.
    static func version7(_ state: PartitionState) throws -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        state.indexes.encodeTextTotals(into: &w)
        let bytes = state.encodeState()
        #expect(bytes[0] == 8 && Array(bytes.suffix(w.bytes.count)) == w.bytes)
        return [7] + bytes[1..<(bytes.count - w.bytes.count)]
    }

    @Test func rankingWhileTheIndexBuildsIsTheRankingOnceBuilt() async throws {
        let dir = TempDir("rank-building")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        let notes = [note("a", "swift database log"), note("b", "swift swift swift"), note("d", "swift coffee fox brown quick log database"), note("e", "Swift")]
            + Self.fillers.enumerated().map { note("f\($0.offset)", $0.element) }
        _ = try await db.modify(notes.map { .create($0) })
        store.indexBuilder.pause()
        let q = Self.search("swift log")
        let scanned = try await db.query(q)
        #expect(scanned.plan.zones[0].order.hasPrefix("ranked by BM25 from the records read"), "\(scanned.plan)")
        store.indexBuilder.resume()
        await store.waitForIndexBuilds()
        let indexed = try await db.query(q)
        #expect(indexed.plan.zones[0].order.hasPrefix("ranked by BM25 from"), "\(indexed.plan)")
        #expect(!indexed.plan.zones[0].order.contains("records read"))
        #expect(scanned.records.map(\.recordName) == indexed.records.map(\.recordName))
        #expect(indexed.records.count == 4 + Self.fillers.count)
        try await store.close()
    }
}
