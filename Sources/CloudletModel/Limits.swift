/// CloudKit Web Services' per-request limits, which the engine and the wire both enforce.
public enum CloudletLimits {
    /// Operations in one `records/modify` (and one `modify(_:atomic:)` call).
    public static let operationsPerRequest = 200
    /// Records in one `records/lookup`.
    public static let lookupsPerRequest = 200
    /// Records in one query page, and the default page size.
    public static let queryResults = 200
    /// Changes in one change-feed page, and the default page size.
    public static let changesPerPage = 200
    /// Zones in one `changes/zone` request.
    public static let zonesPerRequest = 200
}
