/// Signs and checks messages between the processes of one deployment (the nodes of a cluster) with a key they share:
/// each message travels as `HMAC-SHA256(key, message) ‖ message`. Without the key nobody can make a message a node
/// accepts; the key says nothing about secrecy (use TLS between nodes for that).
public struct MessageAuthenticator: Sendable {
    /// Bytes of the tag in front of every sealed message.
    public static let tagLength = 32
    private let key: [UInt8]

    public init(key: [UInt8]) {
        precondition(key.count >= 16, "a message key needs at least 128 bits")
        self.key = key
    }

    /// A new random key (32 bytes, as 64 hex characters) to share among the nodes.
    public static func newKey() throws -> String { try Secrets.newToken() }

    /// The message with its tag in front.
    public func seal(_ message: [UInt8]) -> [UInt8] { tag(message) + message }

    /// The tag of `message` alone: HMAC-SHA256 under the key (also a way to derive another key from this one).
    public func tag(_ message: [UInt8]) -> [UInt8] { Secrets.hmacSHA256(key: key, message) }

    /// The message, if `sealed` carries a tag made with this key for exactly these bytes; nil otherwise.
    public func open(_ sealed: [UInt8]) -> ArraySlice<UInt8>? {
        guard sealed.count >= Self.tagLength else { return nil }
        let message = sealed[Self.tagLength...]
        guard Secrets.constantTimeEqual(sealed[..<Self.tagLength], Secrets.hmacSHA256(key: key, Array(message))) else { return nil }
        return message
    }
}
