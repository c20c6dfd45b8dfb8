import CloudletCore

/// An opaque position in a change feed (CloudKit's `CKServerChangeToken` / `syncToken`): pass the token a
/// fetch returned to the next fetch to get only what changed since.
///
/// Serialized as base64 (``base64``). Tokens are versioned and checksummed, and name the store, the zone (or
/// database) and the zone's incarnation they belong to: a token from elsewhere is refused with
/// `invalidArguments` (`BAD_REQUEST`), never answered wrongly; one older than the tombstone retention window gets
/// `changeTokenExpired` (`CHANGE_TOKEN_EXPIRED`), and the client must fetch from scratch.
public struct ChangeToken: Sendable, Hashable, CustomStringConvertible {
    /// The token's bytes.
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Parses a token from its base64 form; nil if it is not base64.
    public init?(base64: String) {
        guard let b = Base64.decode(base64) else { return nil }
        bytes = b
    }

    public var base64: String { Base64.encode(bytes) }
    public var description: String { base64 }
}
