import CloudletCore

/// A query: a record type, a predicate and sort descriptors (CloudKit's `CKQuery`, Web Services `query`).
///
/// ```swift
/// let q = try Query(recordType: "Note", format: "kind == %@ AND due < %@", "todo", Date(),
///                   sortDescriptors: [.descending("due")])
/// let page = try await db.query(q, zoneID: zone, resultsLimit: 50)
/// ```
public struct Query: Sendable, Hashable {
    public var recordType: String
    /// Which records match; ``Predicate/all`` for every record of the type.
    public var predicate: Predicate
    /// The order of the results; ties (and queries without descriptors) are ordered by record name.
    public var sortDescriptors: [QuerySort]

    public init(recordType: String, predicate: Predicate = .all, sortDescriptors: [QuerySort] = []) {
        self.recordType = recordType
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }

    /// A query whose predicate is an NSPredicate-style format string (``Predicate/init(format:_:)``).
    /// - Throws: ``CloudletError`` `invalidArguments` saying where and why the format is wrong.
    public init(
        recordType: String, format: String, _ arguments: any PredicateArgument..., sortDescriptors: [QuerySort] = []
    ) throws {
        self.init(
            recordType: recordType, predicate: try Predicate(format: format, arguments: arguments),
            sortDescriptors: sortDescriptors)
    }
}

/// One sort descriptor of a query: a field, ascending or descending, or the distance of a LOCATION field from a
/// point (CloudKit's `NSSortDescriptor` / `CKLocationSortDescriptor`; Web Services `sortBy` entries with
/// `fieldName`, `ascending`, `relativeLocation`). Named so as not to collide with Foundation's `SortDescriptor`.
///
/// Records without the field sort before all others (ascending); records without the location sort after every
/// distance. System fields are named as in predicates (`recordName`, `createdTimestamp`, `creationDate`, …).
public struct QuerySort: Sendable, Hashable {
    public var field: String
    public var ascending: Bool
    /// When set, sort by great-circle distance of `field` from this location.
    public var relativeLocation: Location?

    public init(_ field: String, ascending: Bool = true, relativeLocation: Location? = nil) {
        self.field = SystemField(name: field)?.rawValue ?? field
        self.ascending = ascending
        self.relativeLocation = relativeLocation
    }

    public static func ascending(_ field: String) -> QuerySort { QuerySort(field) }
    public static func descending(_ field: String) -> QuerySort { QuerySort(field, ascending: false) }
    /// Nearest first.
    public static func distance(_ field: String, from location: Location) -> QuerySort {
        QuerySort(field, relativeLocation: location)
    }
}

/// Where a query's next page starts (CloudKit's `continuationMarker` / `CKQueryOperation.Cursor`).
///
/// Opaque and self-contained: it holds the sort-key values and record name (and zone) of the last result, not
/// server state, so it survives restarts and resumes exactly after that result even while records change. It is
/// checksummed and tied to its query; another query's marker is refused with `invalidArguments`.
public struct QueryCursor: Sendable, Hashable, CustomStringConvertible {
    /// The marker as the Web Services send it (base64).
    public let marker: String

    public init(marker: String) { self.marker = marker }
    public var description: String { marker }
}

/// A page of query results.
public struct QueryResults: Sendable {
    /// Matching records, in the query's order.
    public var records: [Record]
    /// Pass to the next call for the next page; nil when there are no more matches.
    public var cursor: QueryCursor?
    /// How the query ran (``QueryPlan``), with the numbers of records examined and matched.
    public var plan: QueryPlan

    public var moreComing: Bool { cursor != nil }

    public init(records: [Record], cursor: QueryCursor?, plan: QueryPlan = QueryPlan(zones: [], notes: [])) {
        self.records = records
        self.cursor = cursor
        self.plan = plan
    }
}

/// How a query runs in each zone: which index found the candidates, how many, and whether results were sorted in
/// memory. ``Database/explain(_:zoneID:zoneWide:)`` returns it without running the query; every
/// ``QueryResults`` carries it with the numbers of the run.
public struct QueryPlan: Sendable, Hashable, CustomStringConvertible {
    public struct Zone: Sendable, Hashable, CustomStringConvertible {
        public var zoneID: ZoneID
        /// How candidates are found: an index (`equality index on 'kind'`, `ordered index on 'price' [range]`,
        /// `full-text index on 'title'`, `spatial index on 'where'`, a union of these for OR), `scan of 'Item'`,
        /// or `nothing` (FALSEPREDICATE).
        public var access: String
        /// The fields whose indexes find the candidates (empty for a scan).
        public var indexedFields: [String]
        /// Candidates the chosen access yields (an estimate for ranges), before the predicate is evaluated.
        public var candidates: Int
        /// Live records of the type in the zone.
        public var recordsOfType: Int
        /// How results are ordered: `record names in order`, `ordered index on 'f'` (no sort), or sorted in memory.
        public var order: String
        /// Whether results were sorted in memory (rather than read in index order).
        public var sortedInMemory: Bool
        /// Records read and evaluated (nil in an explanation).
        public var examined: Int?
        /// Records that matched (nil in an explanation).
        public var matched: Int?

        public var usesIndex: Bool { !indexedFields.isEmpty }

        public init(
            zoneID: ZoneID, access: String, indexedFields: [String], candidates: Int, recordsOfType: Int, order: String,
            sortedInMemory: Bool, examined: Int? = nil, matched: Int? = nil
        ) {
            self.zoneID = zoneID
            self.access = access
            self.indexedFields = indexedFields
            self.candidates = candidates
            self.recordsOfType = recordsOfType
            self.order = order
            self.sortedInMemory = sortedInMemory
            self.examined = examined
            self.matched = matched
        }

        public var description: String {
            var s = "zone \(zoneID.zoneName): \(access), \(candidates) candidate\(candidates == 1 ? "" : "s") of "
                + "\(recordsOfType) record\(recordsOfType == 1 ? "" : "s"); order: \(order)"
            if let examined, let matched { s += "; examined \(examined), matched \(matched)" }
            return s
        }
    }

    public var zones: [Zone]
    /// What else the query did or needs: indexes added just in time (development), indexes still building.
    public var notes: [String]

    public var description: String { (zones.map(\.description) + notes.map { "note: " + $0 }).joined(separator: "\n") }

    public init(zones: [Zone], notes: [String]) {
        self.zones = zones
        self.notes = notes
    }
}
