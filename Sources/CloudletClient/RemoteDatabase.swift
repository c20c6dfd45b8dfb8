import CloudletCore
import CloudletModel
import CloudletWire
import CloudletConcurrency
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One database on the server as the client's caller sees it; every method is one CloudKit Web Services request
/// (`records/modify`, `records/query`, `changes/zone`, …) or, for batches over the server's per-request limits, a
/// few of them.
public struct RemoteDatabase: CloudletDatabase {
    public let container: RemoteContainer
    public let scope: DatabaseScope
    /// `/database/1/{container}/{environment}/{scope}/`, escaped once.
    let pathPrefix: String

    init(container: RemoteContainer, scope: DatabaseScope) {
        self.container = container
        self.scope = scope
        pathPrefix = "/database/1/\(Self.escape(container.identifier))/\(container.environment.rawValue)/\(scope.rawValue)/"
    }

    var client: CloudletClient { container.client }

    // MARK: Records

    public func record(for recordID: RecordID) async throws -> Record {
        try await records(for: [recordID])[0].get()
    }

    /// Several records. The server answers at most ``CloudletLimits/lookupsPerRequest`` a request and each record
    /// once, so a longer list (or one naming a record twice) is sent as several requests of distinct names.
    public func records(for recordIDs: [RecordID]) async throws -> [Result<Record, CloudletError>] {
        if recordIDs.count == 1 { return try await lookup(recordIDs[...]) }
        var unique: [RecordID] = []
        var slot: [RecordID: Int] = [:]
        for id in recordIDs where slot[id] == nil {
            slot[id] = unique.count
            unique.append(id)
        }
        var found: [Result<Record, CloudletError>] = []
        found.reserveCapacity(unique.count)
        for chunk in unique.chunked(CloudletLimits.lookupsPerRequest) { found += try await lookup(chunk) }
        return recordIDs.map { found[slot[$0]!] }
    }

    /// One `records/lookup` request for distinct names, at most ``CloudletLimits/lookupsPerRequest`` of them.
    private func lookup(_ ids: ArraySlice<RecordID>) async throws -> [Result<Record, CloudletError>] {
        let body = Self.json { w in
            w.object { w in
                w.key("records")
                w.array { w in
                    for id in ids {
                        w.object { w in
                            w.member("recordName", id.recordName)
                            w.key("zoneID")
                            ZoneIDCoding.writeRequest(id.zoneID, to: &w)
                        }
                    }
                }
            }
        }
        let response = try await callForBytes("records/lookup", body: body, changesData: false)
        let ids = Array(ids)
        return try zip(ids, decoding { try ClientCoding.recordResults(response, for: ids) }).map { id, result in
            switch result {
            case .saved(let r): .success(r)
            case .failed(_, let e): .failure(e)
            case .deleted: .failure(CloudletError(.unknownItem, "record '\(id.recordName)' does not exist"))
            }
        }
    }

    /// `records/modify`. A non-atomic batch over ``CloudletLimits/operationsPerRequest`` operations, or one the
    /// server finds too large (`LIMIT_EXCEEDED`, HTTP 413), is split and sent in parts, as CloudKit tells its
    /// clients to; an atomic batch is all or nothing, so it is never split and such an error comes back as it is.
    public func modify(_ operations: [RecordOperation], atomic: Bool) async throws -> [RecordResult] {
        if operations.isEmpty { return [] }
        let operations = try await uploadingAssets(operations)
        if !atomic, operations.count > CloudletLimits.operationsPerRequest {
            var out: [RecordResult] = []
            for chunk in operations.chunked(CloudletLimits.operationsPerRequest) {
                out += try await modify(Array(chunk), atomic: false)
            }
            return out
        }
        let body = Self.json { w in
            w.object { w in
                w.key("operations")
                w.array { w in for op in operations { ClientCoding.writeOperation(op, to: &w) } }
                w.member("atomic", atomic)
            }
        }
        let response: [UInt8]
        do {
            response = try await callForBytes("records/modify", body: body, changesData: true)
        } catch let e as CloudletError where !atomic && operations.count > 1 && e.code == .limitExceeded {
            let half = operations.count / 2
            return try await modify(Array(operations[..<half]), atomic: false)
                + modify(Array(operations[half...]), atomic: false)
        }
        return try decoding { try ClientCoding.recordResults(response, for: operations.map(\.recordID)) }
    }

    // MARK: Queries

    public func query(
        _ query: Query, zoneID: ZoneID, zoneWide: Bool, resultsLimit: Int?, desiredKeys: [String]?,
        continuationMarker: QueryCursor?
    ) async throws -> QueryResults {
        let body = Self.json { w in
            w.object { w in
                Self.writeQuery(query, zoneID: zoneID, zoneWide: zoneWide, to: &w)
                if let resultsLimit { w.member("resultsLimit", Int64(resultsLimit)) }
                if let desiredKeys {
                    w.key("desiredKeys")
                    w.array { w in for k in desiredKeys { w.string(k) } }
                }
                if let continuationMarker { w.member("continuationMarker", continuationMarker.marker) }
            }
        }
        let response = try await callForBytes("records/query", body: body, changesData: false)
        let (records, marker) = try decoding { try ClientCoding.queryResults(response, zone: zoneID) }
        return QueryResults(records: records, cursor: marker.map(QueryCursor.init(marker:)))
    }

    /// Cloudlet's `records/count`.
    public func count(_ query: Query, zoneID: ZoneID, zoneWide: Bool) async throws -> Int {
        let body = Self.json { w in w.object { w in Self.writeQuery(query, zoneID: zoneID, zoneWide: zoneWide, to: &w) } }
        let response = try await call("records/count", body: body, changesData: false)
        return try decoding {
            guard let n = try response.int("count", at: "") else { throw APIError.badRequest("count is missing") }
            return Int(n)
        }
    }

    private static func writeQuery(_ query: Query, zoneID: ZoneID, zoneWide: Bool, to w: inout JSONWriter) {
        w.key("query")
        w.object { w in
            w.member("recordType", query.recordType)
            w.key("filterBy")
            FilterCoding.write(query.predicate, zone: zoneID, to: &w)
            w.key("sortBy")
            w.array { w in
                for s in query.sortDescriptors {
                    w.object { w in
                        w.member("fieldName", s.field)
                        w.member("ascending", s.ascending)
                        if let l = s.relativeLocation {
                            w.key("relativeLocation")
                            FieldCoding.write(.location(l), to: &w, numbersAsStrings: false, zone: zoneID)
                        }
                    }
                }
            }
        }
        w.key("zoneID")
        ZoneIDCoding.writeRequest(zoneID, to: &w)
        w.member("zoneWide", zoneWide)
    }

    // MARK: Zones

    public func createZone(_ zoneID: ZoneID) async throws -> RecordZone {
        try await modifyZone("create", zoneID)
    }

    public func zones() async throws -> [RecordZone] {
        let response = try await call("zones/list", body: nil, changesData: false)
        return try decoding {
            try (response.array("zones", at: "") ?? []).enumerated().map { i, z in try ClientCoding.zone(z, at: "zones[\(i)]") }
        }.map { try $0.get() }
    }

    public func zone(for zoneID: ZoneID) async throws -> RecordZone {
        let body = Self.json { w in
            w.object { w in
                w.key("zones")
                w.array { w in ZoneIDCoding.writeRequest(zoneID, to: &w) }
            }
        }
        let response = try await call("zones/lookup", body: body, changesData: false)
        return try decoding {
            try ClientCoding.zone(ClientCoding.items(response, key: "zones", count: 1)[0], at: "zones[0]")
        }.get()
    }

    public func deleteZone(_ zoneID: ZoneID) async throws {
        _ = try await modifyZone("delete", zoneID)
    }

    private func modifyZone(_ operation: String, _ zoneID: ZoneID) async throws -> RecordZone {
        let body = Self.oneOperation(operation, "zone") { w in
            w.object { w in
                w.key("zoneID")
                ZoneIDCoding.writeRequest(zoneID, to: &w)
            }
        }
        let response = try await call("zones/modify", body: body, changesData: true)
        return try decoding {
            try ClientCoding.zone(ClientCoding.items(response, key: "zones", count: 1)[0], at: "zones[0]")
        }.get()
    }

    // MARK: Change feeds

    public func zoneChanges(
        _ zoneID: ZoneID, since token: ChangeToken?, resultsLimit: Int?, desiredKeys: [String]?,
        desiredRecordTypes: [String]?
    ) async throws -> ZoneChanges {
        let body = Self.json { w in
            w.object { w in
                w.key("zones")
                w.array { w in
                    w.object { w in
                        w.key("zoneID")
                        ZoneIDCoding.writeRequest(zoneID, to: &w)
                        if let token { w.member("syncToken", token.base64) }
                        if let resultsLimit { w.member("resultsLimit", Int64(resultsLimit)) }
                        for (key, list) in [("desiredKeys", desiredKeys), ("desiredRecordTypes", desiredRecordTypes)] {
                            guard let list else { continue }
                            w.key(key)
                            w.array { w in for s in list { w.string(s) } }
                        }
                    }
                }
            }
        }
        let response = try await call("changes/zone", body: body, changesData: false)
        return try decoding {
            let item = try ClientCoding.items(response, key: "zones", count: 1)[0].requireObject(at: "zones[0]")
            return try ClientCoding.zoneChanges(item, at: "zones[0]", zone: zoneID)
        }
    }

    public func databaseChanges(since token: ChangeToken?, resultsLimit: Int?) async throws -> DatabaseChanges {
        let body = Self.json { w in
            w.object { w in
                if let token { w.member("syncToken", token.base64) }
                if let resultsLimit { w.member("resultsLimit", Int64(resultsLimit)) }
            }
        }
        let response = try await call("changes/database", body: body, changesData: false)
        return try decoding { try ClientCoding.databaseChanges(response) }
    }

    // MARK: Subscriptions

    /// Saves a subscription, new or not (the embedded engine's `saveSubscription` replaces one of the same ID;
    /// the server's `create` refuses to, so an existing one is sent again as `update`).
    public func saveSubscription(_ subscription: Subscription) async throws -> Subscription {
        do {
            return try await modifySubscription("create", subscription.id, subscription)!
        } catch let e as CloudletError where e.code == .recordExists {
            return try await modifySubscription("update", subscription.id, subscription)!
        }
    }

    public func subscriptions() async throws -> [Subscription] {
        let response = try await call("subscriptions/list", body: nil, changesData: false)
        return try decoding {
            try (response.array("subscriptions", at: "") ?? []).enumerated().map { i, s in
                try ClientCoding.subscription(s, at: "subscriptions[\(i)]")
            }
        }.map { try $0.get() }
    }

    public func subscription(_ id: String) async throws -> Subscription {
        let body = Self.json { w in
            w.object { w in
                w.key("subscriptions")
                w.array { w in w.object { w in w.member("subscriptionID", id) } }
            }
        }
        let response = try await call("subscriptions/lookup", body: body, changesData: false)
        return try decoding {
            try ClientCoding.subscription(ClientCoding.items(response, key: "subscriptions", count: 1)[0], at: "subscriptions[0]")
        }.get()
    }

    public func deleteSubscription(_ id: String) async throws {
        _ = try await modifySubscription("delete", id, nil)
    }

    private func modifySubscription(_ operation: String, _ id: String, _ s: Subscription?) async throws -> Subscription? {
        let body = Self.oneOperation(operation, "subscription") { w in
            if let s { SubscriptionCoding.write(s, owner: defaultOwnerName, to: &w) } else {
                w.object { w in w.member("subscriptionID", id) }
            }
        }
        let response = try await call("subscriptions/modify", body: body, changesData: true)
        let item = try decoding { try ClientCoding.items(response, key: "subscriptions", count: 1)[0] }
        if s == nil {
            let o = try decoding { try item.requireObject(at: "subscriptions[0]") }
            if let e = try decoding({ try ClientCoding.error(o, at: "subscriptions[0]", zone: .default) }) { throw e }
            return nil
        }
        return try decoding { try ClientCoding.subscription(item, at: "subscriptions[0]") }.get()
    }

    // MARK: Notifications

    /// The caller's notifications through the web courier: a courier token from `tokens/create` (made once per
    /// container and environment, and again if the server has forgotten it), then a long-poll of up to `wait`
    /// seconds. The server decides how many a poll returns; more than `limit` are cut to `limit` (and `next` to
    /// the last one kept).
    public func notifications(after position: NotificationID?, limit: Int, wait: Double) async throws -> NotificationBatch {
        for attempt in 0..<2 {
            let courierURL = try await courier().poll
            var url = courierURL + "&timeout=\(max(0, min(wait, 60)))"
            if let position { url += "&after=\(position)" }
            do {
                let response = try await send(
                    HTTPClientRequest(method: "GET", url: url), changesData: false)
                var batch = try decoding {
                    try ClientCoding.notifications(
                        response,
                        database: DatabaseID(
                            container: container.identifier, environment: container.environment, scope: scope,
                            owner: defaultOwnerName))
                }
                if batch.notifications.count > limit, limit >= 0 {
                    batch.notifications.removeLast(batch.notifications.count - limit)
                    if let last = batch.notifications.last { batch.next = last.id } else if let position { batch.next = position }
                }
                return batch
            } catch let e as CloudletError where e.code == .authenticationFailed && attempt == 0 {
                client.couriers.set(courierKey, nil)  // the server restarted and forgot the token
            }
        }
        throw CloudletError(.authenticationFailed, "the server refused a new notification courier token")
    }

    private var courierKey: String { "\(container.identifier)/\(container.environment.rawValue)" }

    /// The courier token's URLs, from `tokens/create` the first time.
    private func courier() async throws -> CourierURLs {
        if let known = client.couriers.get(courierKey) { return known }
        let response = try await call("tokens/create", body: Self.json { w in w.object { _ in } }, changesData: true)
        let urls = try decoding {
            guard let poll = try response.string("webcourierURL", at: ""), let ws = try response.string("websocketURL", at: "")
            else { throw APIError.badRequest("webcourierURL or websocketURL is missing") }
            return CourierURLs(poll: poll, websocket: ws)
        }
        client.couriers.set(courierKey, urls)
        return urls
    }

    /// The caller's notifications as the server pushes them, over the courier's websocket (one text message per
    /// notification, `{"gap": true}` when the log could not cover `position`). The stream ends with an error when
    /// the connection breaks; start a new one from the last notification's ID to resume. Over a transport other
    /// than libcurl (a test's) it long-polls instead.
    public func notificationEvents(after position: NotificationID?) -> AsyncThrowingStream<NotificationEvent, any Error> {
        guard client.transport is CurlTransport else { return longPolledNotificationEvents(after: position) }
        let database = DatabaseID(
            container: container.identifier, environment: container.environment, scope: scope, owner: defaultOwnerName)
        let caFile = client.caFile
        return AsyncThrowingStream { continuation in
            let stop = StopFlag()
            let task = Task {
                do {
                    let base = try await courier().websocket
                    let url = position.map { base + "&after=\($0)" } ?? base
                    try await BlockingThreads.shared.run { () throws -> Void in
                        let socket: WebSocketConnection
                        do { socket = try WebSocketConnection(url: url, caFile: caFile, timeout: 10) } catch let f as TransportFailure {
                            throw f.cloudletError
                        }
                        while !stop.isSet {
                            let message: [UInt8]?
                            do { message = try socket.receive(timeout: 0.25) } catch let f as TransportFailure {
                                throw f.cloudletError
                            }
                            guard let message else { continue }
                            guard case .object(let o)? = try? JSONParser.parse(message) else {
                                throw CloudletError(.internalError, "a notification message is not a JSON object")
                            }
                            if o["gap"]?.boolValue == true {
                                continuation.yield(.gap)
                            } else {
                                do {
                                    continuation.yield(.notification(try ClientCoding.notification(o, at: "message", database: database)))
                                } catch let e as APIError {
                                    throw CloudletError(.internalError, "a notification message is malformed: \(e.reason)")
                                }
                            }
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in
                stop.set()
                task.cancel()
            }
        }
    }

    // MARK: Assets

    /// Uploads the assets of `operations` that were made from a file or bytes (``AssetReference/needsImport``) the
    /// Web Services way, and returns the operations with each such asset replaced by its upload's receipt: upload
    /// URLs from `assets/upload` (one per asset, bound to the zone, record type and field), then each file POSTed
    /// to its URL, streamed from disk. So a record with a new asset saves the same way as in the embedded engine.
    private func uploadingAssets(_ operations: [RecordOperation]) async throws -> [RecordOperation] {
        struct Slot {
            var op: Int
            var field: String
            var item: Int?
            var asset: AssetReference
        }
        var slots: [Slot] = []
        for (i, op) in operations.enumerated() {
            guard let r = op.record else { continue }
            for name in r.fields.keys.sorted() {
                switch r.fields[name]! {
                case .asset(let a) where a.needsImport: slots.append(Slot(op: i, field: name, item: nil, asset: a))
                case .list(_, let items):
                    for (k, item) in items.enumerated() {
                        if case .asset(let a) = item, a.needsImport { slots.append(Slot(op: i, field: name, item: k, asset: a)) }
                    }
                default: break
                }
            }
        }
        if slots.isEmpty { return operations }
        var records = operations.map(\.record)
        let byZone = Dictionary(grouping: slots.indices) { operations[slots[$0].op].recordID.zoneID }
        for (zone, indices) in byZone.sorted(by: { $0.key.zoneName < $1.key.zoneName }) {
            for chunk in indices.chunked(CloudletLimits.operationsPerRequest) {
                let body = Self.json { w in
                    w.object { w in
                        w.key("zoneID")
                        ZoneIDCoding.writeRequest(zone, to: &w)
                        w.key("tokens")
                        w.array { w in
                            for i in chunk {
                                let r = records[slots[i].op]!
                                w.object { w in
                                    w.member("recordName", r.recordName)
                                    w.member("recordType", r.recordType)
                                    w.member("fieldName", slots[i].field)
                                }
                            }
                        }
                    }
                }
                let response = try await call("assets/upload", body: body, changesData: false)
                let tokens = try decoding { try ClientCoding.items(response, key: "tokens", count: chunk.count) }
                for (k, i) in chunk.enumerated() {
                    let url = try decoding {
                        guard let u = try tokens[k].requireObject(at: "tokens[\(k)]").string("url", at: "tokens[\(k)]") else {
                            throw APIError.badRequest("tokens[\(k)].url is missing")
                        }
                        return u
                    }
                    let slot = slots[i]
                    let upload = HTTPClientRequest(
                        method: "POST", url: url, headers: [("Content-Type", "application/octet-stream")],
                        body: slot.asset.sourceFile == nil ? (slot.asset.sourceData ?? []) : nil, bodyFile: slot.asset.sourceFile)
                    // Content-addressed: sending the same bytes again stores nothing twice, so a retry is safe.
                    let answer = try await send(upload, changesData: false)
                    let uploaded = try decoding { () throws -> AssetReference in
                        guard let file = try answer.object("singleFile", at: "") else {
                            throw APIError.badRequest("singleFile is missing")
                        }
                        guard case .asset(let a) = try FieldCoding.decode(
                            .object(["value": .object(file), "type": .string("ASSETID")]), at: "singleFile",
                            schemaType: nil, zone: zone)
                        else { throw APIError.badRequest("singleFile is not an asset") }
                        return a
                    }
                    var r = records[slot.op]!
                    if let item = slot.item, case .list(let type, var items) = r.fields[slot.field] {
                        items[item] = .asset(uploaded)
                        r.fields[slot.field] = .list(type, items)
                    } else {
                        r.fields[slot.field] = .asset(uploaded)
                    }
                    records[slot.op] = r
                }
            }
        }
        return zip(operations, records).map { op, r in r.map { op.replacingRecord($0) } ?? op }
    }

    /// The bytes at the asset's `downloadURL` (CloudKit's `${f}` file name placeholder filled in).
    public func assetData(_ asset: AssetReference) async throws -> [UInt8] {
        try await exchange(HTTPClientRequest(method: "GET", url: try Self.downloadURL(asset)), changesData: false).body
    }

    /// Streams the asset to a temporary file beside `path`, then renames it into place.
    public func downloadAsset(_ asset: AssetReference, to path: String) async throws {
        let temporary = path + ".cloudlet-download"
        do {
            _ = try await exchange(
                HTTPClientRequest(method: "GET", url: try Self.downloadURL(asset), responseFile: temporary), changesData: false)
            guard rename(temporary, path) == 0 else { throw CloudletError(.io, "rename to \(path): errno \(errno)") }
        } catch {
            unlink(temporary)
            throw error
        }
    }

    private static func downloadURL(_ asset: AssetReference) throws -> String {
        guard let url = asset.downloadURL else {
            throw CloudletError(
                .invalidArguments,
                "asset \(asset.fileChecksum.isEmpty ? "(not saved)" : asset.fileChecksum) has no downloadURL: read its record through the server first")
        }
        return url.replacingOccurrences(of: "${f}", with: "asset")
    }

    // MARK: - Requests

    /// `POST {url}/database/1/{container}/{environment}/{scope}/{operation}` (GET without a body) and the
    /// response's JSON object. `changesData` says whether a request that may have reached the server can be sent
    /// again (never for writes).
    func call(_ operation: String, body: [UInt8]?, changesData: Bool) async throws -> [String: JSONValue] {
        try Self.object(try await callForBytes(operation, body: body, changesData: changesData), answering: operation)
    }

    /// ``call(_:body:changesData:)``'s 200 response unparsed, for the responses read straight from their bytes.
    func callForBytes(_ operation: String, body: [UInt8]?, changesData: Bool) async throws -> [UInt8] {
        let subpath = pathPrefix + operation
        var request = HTTPClientRequest(
            method: body == nil ? "GET" : "POST", url: client.url + subpath + client.tokenQuery, body: body)
        if let key = client.serverKey {
            // Signed: no tokens; the signature covers the date, the body and the path.
            request.headers += try key.headers(body: body ?? [], subpath: subpath)
        }
        if body != nil { request.headers.append(("Content-Type", "application/json")) }
        return try await exchange(request, changesData: changesData).body
    }

    /// Sends with the client's ``RetryPolicy`` and returns the 200 response's JSON object; any other response is
    /// its error as a ``CloudletError``.
    private func send(_ request: HTTPClientRequest, changesData: Bool) async throws -> [String: JSONValue] {
        let response = try await exchange(request, changesData: changesData)
        return try Self.object(response.body, answering: CurlTransport.redacted(request.url))
    }

    /// A 200 response's body as the JSON object it must be.
    private static func object(_ body: [UInt8], answering what: String) throws -> [String: JSONValue] {
        guard case .object(let o)? = try? JSONParser.parse(body) else {
            throw CloudletError(.internalError, "the server's answer to \(what) is not a JSON object")
        }
        return o
    }

    /// Sends with the client's ``RetryPolicy`` until a 200 response, which it returns; any other response is its
    /// error as a ``CloudletError``.
    private func exchange(_ request: HTTPClientRequest, changesData: Bool) async throws -> HTTPClientResponse {
        let policy = client.retry
        var attempt = 0
        while true {
            attempt += 1
            let retryAfter: Double?
            let failure: CloudletError
            do {
                let response = try await client.transport.send(request)
                if response.status == 200 { return response }
                let (error, after, retryable) = Self.failure(response)
                guard retryable, attempt < policy.maxAttempts else { throw error }
                (failure, retryAfter) = (error, after)
            } catch let f as TransportFailure {
                let retryable = f.stage == .connecting || (f.stage == .exchanging && !changesData)
                guard retryable, attempt < policy.maxAttempts else { throw f.cloudletError }
                (failure, retryAfter) = (f.cloudletError, nil)
            }
            let delay = policy.delay(afterAttempt: attempt, retryAfter: retryAfter, jitter: Double.random(in: 0.5...1))
            do { try await Task.sleep(nanoseconds: UInt64(delay * 1e9)) } catch { throw failure }
        }
    }

    /// A response other than 200: its error, the server's `retryAfter` (seconds), and whether to try again.
    static func failure(_ response: HTTPClientResponse) -> (CloudletError, Double?, Bool) {
        let o = (try? JSONParser.parse(response.body))?.objectValue
        guard let o, let api = APIError(json: o, status: response.status) else {
            let text = String(decoding: response.body.prefix(300), as: UTF8.self)
            let busy = [502, 503, 504].contains(response.status)
            return (CloudletError(busy ? .serviceUnavailable : .internalError, "HTTP \(response.status): \(text)"), nil, busy)
        }
        var error = (try? ClientCoding.error(o, at: "", zone: .default, status: response.status)) ?? api.cloudletError
        if response.status == 413, error.code == .invalidArguments { error.code = .limitExceeded }
        let retryAfter = o["retryAfter"]?.doubleValue ?? response.header("Retry-After").flatMap(Double.init)
        let retryable =
            ["THROTTLED", "TRY_AGAIN_LATER", "ZONE_BUSY", "SERVICE_UNAVAILABLE"].contains(api.serverErrorCode)
            && error.code != .readOnly
        return (error, retryAfter, retryable)
    }

    /// A malformed response (an ``APIError`` from the codings) as an internal error naming the member.
    func decoding<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as APIError {
            throw CloudletError(.internalError, "the server's response is malformed: \(e.reason)")
        } catch let e as JSONParser.Error {
            throw CloudletError(.internalError, "the server's response is not valid JSON: \(e)")
        }
    }

    /// `{operations: [{operationType: operation, <key>: …}]}`, what `zones/modify` and `subscriptions/modify` take.
    private static func oneOperation(_ operation: String, _ key: String, _ value: (inout JSONWriter) -> Void) -> [UInt8] {
        json { w in
            w.object { w in
                w.key("operations")
                w.array { w in
                    w.object { w in
                        w.member("operationType", operation)
                        w.key(key)
                        value(&w)
                    }
                }
            }
        }
    }

    static func json(_ body: (inout JSONWriter) -> Void) -> [UInt8] {
        var w = JSONWriter()
        body(&w)
        return w.bytes
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters.
    static func escape(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(b)
            default:
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}


/// Set once, from any thread.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}
