import CloudletCore

extension Database {
    /// Who this handle subscribes as.
    var subscriber: SubscriberID { SubscriberID(database: id, user: user) }

    /// Creates or replaces a subscription (CloudKit `subscriptions/modify` create/update).
    ///
    /// - Throws: `invalidArguments` for a bad ID, record type or predicate field; `zoneNotFound` for a zone
    ///   subscription to a missing zone; `badDatabase` for a database subscription in the public database.
    @discardableResult
    public func saveSubscription(_ subscription: Subscription) async throws -> Subscription {
        try authorize(.subscribe)
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
        let who = subscriber
        let (_, version) = try await store.catalog.commit(waitingForRoom: { _ in ([.saveSubscription(who, subscription)], ()) })
        try await store.catalog.waitDurable(version)
        store.notificationHub.start()
        return subscription
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
        try authorize(.subscribe)
        let who = subscriber
        let (_, version) = try await store.catalog.commit(waitingForRoom: { st in
            guard st.subscriptions(of: who)[id] != nil else {
                throw CloudletError(.unknownItem, "subscription '\(id)' does not exist")
            }
            return ([.deleteSubscription(who, id: id)], ())
        })
        try await store.catalog.waitDurable(version)
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
