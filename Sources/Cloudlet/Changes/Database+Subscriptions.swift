import CloudletCore

extension Database {
    /// Who this handle subscribes as.
    var subscriber: SubscriberID { SubscriberID(database: id, user: user) }

    /// Creates or replaces a subscription (CloudKit `subscriptions/modify` create/update).
    ///
    /// - Throws: `invalidArguments` for a bad ID, record type or predicate field; `zoneNotFound` for a zone
    ///   subscription to a missing zone; `badDatabase` for a database subscription in the public database;
    ///   `quotaExceeded` when the user has ``StoreConfiguration/subscriptionsPerUser`` subscriptions in this database
    ///   already.
    @discardableResult
    public func saveSubscription(_ subscription: Subscription) async throws -> Subscription {
        try await modifySubscriptions([.save(subscription)])[0].get()!
    }

    /// One change of a ``modifySubscriptions(_:)`` batch.
    public enum SubscriptionOperation: Sendable {
        /// Create or replace.
        case save(Subscription)
        /// Create; `recordExists` when one with that ID exists.
        case create(Subscription)
        /// Replace; `unknownItem` when none with that ID exists.
        case update(Subscription)
        /// Delete; `unknownItem` when none with that ID exists.
        case delete(String)

        var id: String {
            switch self {
            case .save(let s), .create(let s), .update(let s): s.id
            case .delete(let id): id
            }
        }
    }

    /// Applies a batch of subscription changes in one catalog commit (CloudKit `subscriptions/modify`): each
    /// operation succeeds or fails on its own (the result in its place: the saved subscription, nil for a
    /// deletion), as CloudKit's per-item errors — except the per-user cap, which is checked for the batch as a
    /// whole: when the subscriptions left after it would pass ``StoreConfiguration/subscriptionsPerUser`` (and be
    /// more than before), the whole batch fails with `quotaExceeded` and nothing is changed.
    public func modifySubscriptions(_ operations: [SubscriptionOperation]) async throws -> [Result<Subscription?, CloudletError>] {
        try authorize(.subscribe)
        var results: [Result<Subscription?, CloudletError>?] = Array(repeating: nil, count: operations.count)
        for (i, op) in operations.enumerated() {
            switch op {
            case .save(let sub), .create(let sub), .update(let sub):
                do { try await validate(sub) } catch let e as CloudletError { results[i] = .failure(e) }
            case .delete: break
            }
        }
        let who = subscriber
        let cap = store.configuration.subscriptionsPerUser
        let pending = results
        let (planned, version) = try await store.catalog.commit(waitingForRoom: { st -> ([Mutation], [Result<Subscription?, CloudletError>?]) in
            var out = pending
            var mutations: [Mutation] = []
            let before = st.subscriptions(of: who)
            var ids = Set(before.keys)
            for (i, op) in operations.enumerated() where out[i] == nil {
                let exists = ids.contains(op.id)
                switch op {
                case .create(let sub) where exists, .update(let sub) where !exists:
                    out[i] = .failure(exists
                        ? CloudletError(.recordExists, "subscription '\(sub.id)' already exists; use update")
                        : CloudletError(.unknownItem, "subscription '\(sub.id)' does not exist"))
                case .save(let sub), .create(let sub), .update(let sub):
                    ids.insert(sub.id)
                    mutations.append(.saveSubscription(who, sub))
                    out[i] = .success(sub)
                case .delete(let id):
                    guard exists else {
                        out[i] = .failure(CloudletError(.unknownItem, "subscription '\(id)' does not exist"))
                        continue
                    }
                    ids.remove(id)
                    mutations.append(.deleteSubscription(who, id: id))
                    out[i] = .success(nil)
                }
            }
            if ids.count > cap && ids.count > before.count {
                throw CloudletError(
                    .quotaExceeded,
                    "\(who.user) would have \(ids.count) subscriptions in this database; the limit is \(cap) per user (StoreConfiguration.subscriptionsPerUser, `cloudlet serve --max-subscriptions-per-user`): nothing was saved")
            }
            return (mutations, out)
        })
        try await store.catalog.waitDurable(version)
        if planned.contains(where: { if case .success(.some) = $0 { true } else { false } }) { store.notificationHub.start() }
        return planned.map { $0! }
    }

    /// Checks a subscription before it is saved: its ID, record type, predicate fields, zone, and that its kind
    /// fits this database.
    private func validate(_ subscription: Subscription) async throws {
        let sid = subscription.id
        guard !sid.isEmpty, sid.utf8.count <= Names.maxLength, sid.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw CloudletError.invalid("subscription ID '\(sid)' is invalid: 1–255 printable ASCII characters")
        }
        switch subscription.kind {
        case .query(let type, let predicate, let zone):
            try Names.validateIdentifier(type, what: "record type")
            for c in predicate.comparisons where c.field != fullTextField && SystemField(rawValue: c.field) == nil {
                try Names.validateIdentifier(c.field, what: "field name")
            }
            if let zone { _ = try await self.zone(for: zone) }
            guard !subscription.firesOn.isEmpty else {
                throw CloudletError.invalid("query subscription '\(sid)' must fire on create, update or delete")
            }
        case .zone(let zone):
            guard !zone.isDefault else {
                throw CloudletError.invalid("zone subscriptions need a custom zone, not the default zone")
            }
            _ = try await self.zone(for: zone)
        case .database:
            guard id.scope != .public else {
                throw CloudletError(.badDatabase, "database subscriptions are not available for the public database")
            }
        }
    }

    /// This user's subscriptions in this database, sorted by ID.
    public func subscriptions() async throws -> [Subscription] {
        try authorize(.subscribe)
        let who = subscriber
        return store.catalog.snapshot().subscriptions(of: who).values.sorted { $0.id < $1.id }
    }

    /// One subscription. - Throws: `unknownItem` when there is none with that ID.
    public func subscription(_ id: String) async throws -> Subscription {
        try authorize(.subscribe)
        let who = subscriber
        guard let s = store.catalog.snapshot().subscriptions(of: who)[id] else {
            throw CloudletError(.unknownItem, "subscription '\(id)' does not exist")
        }
        return s
    }

    /// Deletes a subscription. - Throws: `unknownItem` when there is none with that ID.
    public func deleteSubscription(_ id: String) async throws {
        _ = try await modifySubscriptions([.delete(id)])[0].get()
    }
}

extension Database {
    /// The notifications of this handle's user in this container and environment (``NotificationHub``).
    public func notifications(after position: NotificationID?, limit: Int, wait: Double) async throws -> NotificationBatch {
        try authorize(.subscribe)
        return await store.notifications(
            container: id.container, environment: id.environment, user: user, after: position, limit: limit, wait: wait)
    }
}
