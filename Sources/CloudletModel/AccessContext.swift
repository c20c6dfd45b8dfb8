import CloudletCore

/// Who is calling. Every engine call carries one (a ``CloudletDatabase`` handle is opened for a caller) and the
/// engine checks it in one place, so the embedded API and `cloudlet serve` enforce the same rules. Roles and
/// server-to-server keys refine it as access control grows.
public struct AccessContext: Sendable, Hashable, CustomStringConvertible {
    public enum Caller: Sendable, Hashable {
        /// A signed-in user, by user record name. An embedding application that names no user acts as
        /// `__defaultOwner__`.
        case user(String)
        /// A server-to-server key, by key ID (public database only, as in CloudKit).
        case serverKey(String)
        /// The API token alone: may read the public database, nothing else.
        case anonymous
    }

    public var caller: Caller

    public init(_ caller: Caller) { self.caller = caller }

    public static func user(_ userRecordName: String) -> AccessContext { AccessContext(.user(userRecordName)) }
    public static let anonymous = AccessContext(.anonymous)

    /// The signed-in user's record name; nil for a key or an anonymous caller.
    public var userRecordName: String? { if case .user(let u) = caller { u } else { nil } }

    /// The name written into `created` / `modified` stamps and used for the caller's notifications: the user, or
    /// `__defaultOwner__` for a key or an anonymous caller.
    public var stampName: String { userRecordName ?? defaultOwnerName }

    public var description: String {
        switch caller {
        case .user(let u): "user '\(u)'"
        case .serverKey(let k): "server key '\(k)'"
        case .anonymous: "an anonymous caller"
        }
    }
}
