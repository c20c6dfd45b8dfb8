import Cloudlet

/// The per-item answers of a request that names several things (zones, subscriptions, short GUIDs, zones' change
/// feeds): `body` of each item, in order, a failure kept in its place as the item's CloudKit error (written as a
/// per-item error of a 200 response); any other error is thrown.
func perItemResults<Item, Value>(
    _ items: [Item], _ body: (Item) async throws -> Value
) async throws -> [Result<Value, CloudletError>] {
    var out: [Result<Value, CloudletError>] = []
    out.reserveCapacity(items.count)
    for item in items {
        do { out.append(.success(try await body(item))) } catch let e as CloudletError { out.append(.failure(e)) }
    }
    return out
}
