import CloudletCore

/// Every subscription of the store, indexed by what a record change must have for it to fire: its database, and
/// the zone and record type it names (nil: any). Matching an event looks up at most four buckets — (database, any
/// zone, any type), (database, zone, any type), (database, any zone, type), (database, zone, type) — so its cost
/// follows the subscriptions that can fire, not all of them.
///
/// Kept up to date incrementally by the notification hub from the catalog's subscription changes
/// (``Catalog/subscriptionChanges(after:through:)``), never rebuilt or copied per commit. Owned by the hub's thread.
struct SubscriptionIndex {
    /// A bucket: a database, and the zone and record type a subscription names (nil: any).
    struct Key: Hashable {
        var database: DatabaseID
        var zoneName: String?
        var recordType: String?
    }

    /// One subscription of one subscriber.
    struct Entry: Hashable {
        var who: SubscriberID
        var id: String
    }

    /// Each bucket's subscriptions in candidate order — subscriber's user, then ID (one bucket holds one database)
    /// — so that ``candidates(in:zoneName:recordType:)`` merges at most four sorted lists instead of sorting per event.
    private(set) var buckets: [Key: [(entry: Entry, sub: Subscription)]] = [:]
    /// Where each subscription is filed, for replacing and deleting it.
    private var filed: [Entry: Key] = [:]
    /// Subscribers in shared databases, per (container, environment): a record of a private database notifies them
    /// only through a share, which costs a look at the shares, so that look is taken only when some exist.
    private var shared: [SchemaKey: Int] = [:]
    /// The catalog version the index reflects.
    var version: UInt64 = 0

    /// The number of subscriptions indexed.
    var count: Int { filed.count }

    init() {}

    /// An index of every subscription in `state`.
    init(_ state: CatalogState) {
        for (who, subs) in state.subscriptions { for sub in subs.values { save(who, sub) } }
        version = state.version
    }

    static func key(of sub: Subscription, in database: DatabaseID) -> Key {
        switch sub.kind {
        case .database: Key(database: database)
        case .zone(let z): Key(database: database, zoneName: z.zoneName)
        case .query(let type, _, let z): Key(database: database, zoneName: z?.zoneName, recordType: type)
        }
    }

    /// Adds or replaces a subscription.
    mutating func save(_ who: SubscriberID, _ sub: Subscription) {
        let entry = Entry(who: who, id: sub.id)
        if filed[entry] != nil { delete(who, id: sub.id) }
        let key = Self.key(of: sub, in: who.database)
        var bucket = buckets.removeValue(forKey: key) ?? []
        bucket.insert((entry, sub), at: Self.position(of: entry, in: bucket))
        buckets[key] = bucket
        filed[entry] = key
        if who.database.scope == .shared { shared[SchemaKey(who.database), default: 0] += 1 }
    }

    /// Removes a subscription (nothing if it is not there).
    mutating func delete(_ who: SubscriberID, id: String) {
        let entry = Entry(who: who, id: id)
        guard let key = filed.removeValue(forKey: entry), var bucket = buckets.removeValue(forKey: key) else { return }
        let at = Self.position(of: entry, in: bucket)
        if at < bucket.count, bucket[at].entry == entry { bucket.remove(at: at) }
        if !bucket.isEmpty { buckets[key] = bucket }
        if who.database.scope == .shared {
            let k = SchemaKey(who.database)
            shared[k, default: 1] -= 1
            if shared[k] == 0 { shared[k] = nil }
        }
    }

    /// Applies one catalog mutation (only subscription changes matter here).
    mutating func apply(_ m: Mutation) {
        switch m {
        case .saveSubscription(let who, let sub): save(who, sub)
        case .deleteSubscription(let who, let id): delete(who, id: id)
        default: break
        }
    }

    /// Whether some subscription is in a shared database of `container` and `environment`.
    func hasShared(_ key: SchemaKey) -> Bool { shared[key] != nil }

    /// The subscriptions of `database` that a change of a `recordType` record in zone `zoneName` may fire, in a
    /// stable order (subscriber, then ID): the up to four buckets, each in that order already, merged.
    func candidates(in database: DatabaseID, zoneName: String, recordType: String) -> [(SubscriberID, Subscription)] {
        var lists: [[(entry: Entry, sub: Subscription)]] = []
        for key in [
            Key(database: database), Key(database: database, zoneName: zoneName),
            Key(database: database, recordType: recordType), Key(database: database, zoneName: zoneName, recordType: recordType),
        ] {
            if let bucket = buckets[key] { lists.append(bucket) }
        }
        if lists.count == 1 { return lists[0].map { ($0.entry.who, $0.sub) } }
        var out: [(SubscriberID, Subscription)] = []
        out.reserveCapacity(lists.reduce(0) { $0 + $1.count })
        var next = [Int](repeating: 0, count: lists.count)
        while true {
            var best = -1
            for l in lists.indices where next[l] < lists[l].count {
                if best < 0 || Self.precedes(lists[l][next[l]].entry, lists[best][next[best]].entry) { best = l }
            }
            guard best >= 0 else { return out }
            let e = lists[best][next[best]]
            out.append((e.entry.who, e.sub))
            next[best] += 1
        }
    }

    /// Candidate order within one database: the subscriber's user, then the subscription's ID.
    private static func precedes(_ a: Entry, _ b: Entry) -> Bool {
        a.who.user == b.who.user ? a.id < b.id : a.who.user < b.who.user
    }

    /// Where `entry` is, or would go, in `bucket` (binary search in candidate order).
    private static func position(of entry: Entry, in bucket: [(entry: Entry, sub: Subscription)]) -> Int {
        var (low, high) = (0, bucket.count)
        while low < high {
            let mid = (low + high) / 2
            if precedes(bucket[mid].entry, entry) { low = mid + 1 } else { high = mid }
        }
        return low
    }
}

extension SchemaKey {
    init(_ database: DatabaseID) { self.init(container: database.container, environment: database.environment) }
}
