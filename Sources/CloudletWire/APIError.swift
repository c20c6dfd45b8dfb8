import CloudletCore
import CloudletModel
import Foundation

/// An error as CloudKit Web Services reports it: a `serverErrorCode`, the HTTP status that goes with it, a reason
/// naming what was wrong, and for `AUTHENTICATION_REQUIRED` a `redirectURL`.
///
/// Statuses follow CloudKit's table (`reference/cloudkit.md` §1.15) one to one, with one deliberate exception: a
/// request body over the size limit is HTTP 413 with `BAD_REQUEST` (CloudKit's own 413 code, `QUOTA_EXCEEDED`,
/// means the user's storage is full, which a client would show to the user).
public struct APIError: Error, Sendable, CustomStringConvertible {
    public var serverErrorCode: String
    public var reason: String
    public var status: Int
    public var redirectURL: String?
    /// Seconds to wait before trying again (`THROTTLED`), written as `retryAfter` (whole seconds, rounded up).
    public var retryAfter: Double?
    /// Cloudlet's own code when the error came from one (written as `cloudletErrorCode`).
    public var code: CloudletError.Code?

    public init(_ serverErrorCode: String, _ reason: String, status: Int? = nil, redirectURL: String? = nil) {
        self.serverErrorCode = serverErrorCode
        self.reason = reason
        self.status = status ?? Self.status(for: serverErrorCode)
        self.redirectURL = redirectURL
    }

    /// The engine's error at the server edge: its code's `serverErrorCode` and message, with the files it names
    /// relative to their store and no other host path (``HostPaths/redact(_:)``).
    public init(_ error: CloudletError) {
        self.init(error.code.serverErrorCode, HostPaths.redact(error.message))
        code = error.code
        // A client told to come back later is told when, as CloudKit does: a write the cluster could not acknowledge
        // (no leader, no quorum) reached here without one.
        if error.code == .serviceUnavailable { retryAfter = 1 }
    }

    /// The error as the engine's: Cloudlet's own code when the response named it, else the code its
    /// `serverErrorCode` stands for (``ErrorTable/code(serverErrorCode:)``).
    public var cloudletError: CloudletError {
        CloudletError(code ?? ErrorTable.code(serverErrorCode: serverErrorCode), reason)
    }

    /// An error dictionary as a response carries it (`{serverErrorCode, reason, cloudletErrorCode?,
    /// redirectURL?}`); nil when `json` has no `serverErrorCode`.
    public init?(json: [String: JSONValue], status: Int? = nil) {
        guard let code = json["serverErrorCode"]?.stringValue else { return nil }
        self.init(code, json["reason"]?.stringValue ?? "", status: status, redirectURL: json["redirectURL"]?.stringValue)
        self.code = json["cloudletErrorCode"]?.stringValue.flatMap(CloudletError.Code.init(name:))
    }

    public static func badRequest(_ reason: String) -> APIError { APIError("BAD_REQUEST", reason) }

    /// The HTTP status CloudKit uses for a `serverErrorCode` (``ErrorTable/statuses``; 400 for one it does not
    /// know).
    public static func status(for serverErrorCode: String) -> Int { ErrorTable.statuses[serverErrorCode] ?? 400 }

    public var description: String { "\(serverErrorCode) (\(status)): \(reason)" }

    /// Writes the members every error dictionary has, inside an object being written: `uuid`, `serverErrorCode`,
    /// `reason` and, if set, `redirectURL`. Per-item errors add `recordName` or `zoneID` around them.
    public func writeMembers(to w: inout JSONWriter) {
        w.member("uuid", UUID().uuidString.lowercased())
        w.member("serverErrorCode", serverErrorCode)
        w.member("reason", reason)
        if let code { w.member("cloudletErrorCode", code.description) }
        if let redirectURL { w.member("redirectURL", redirectURL) }
        if let retryAfter { w.member("retryAfter", Int64(retryAfter.rounded(.up))) }
    }
}
