import Cloudlet
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

    public init(_ serverErrorCode: String, _ reason: String, status: Int? = nil, redirectURL: String? = nil) {
        self.serverErrorCode = serverErrorCode
        self.reason = reason
        self.status = status ?? Self.status(for: serverErrorCode)
        self.redirectURL = redirectURL
    }

    /// The engine's error at the server edge: its code's `serverErrorCode` and message.
    public init(_ error: CloudletError) {
        self.init(error.code.serverErrorCode, error.message)
    }

    public static func badRequest(_ reason: String) -> APIError { APIError("BAD_REQUEST", reason) }

    /// The HTTP status CloudKit uses for a `serverErrorCode`.
    public static func status(for serverErrorCode: String) -> Int {
        switch serverErrorCode {
        case "ACCESS_DENIED": 403
        case "ATOMIC_ERROR", "BAD_REQUEST": 400
        case "AUTHENTICATION_FAILED": 401
        case "AUTHENTICATION_REQUIRED": 421
        case "CONFLICT", "EXISTS": 409
        case "NOT_FOUND", "ZONE_NOT_FOUND": 404
        case "QUOTA_EXCEEDED": 413
        case "THROTTLED": 429
        case "TRY_AGAIN_LATER": 503
        case "VALIDATING_REFERENCE_ERROR": 412
        case "INTERNAL_ERROR": 500
        default: 400
        }
    }

    public var description: String { "\(serverErrorCode) (\(status)): \(reason)" }

    /// Writes the members every error dictionary has, inside an object being written: `uuid`, `serverErrorCode`,
    /// `reason` and, if set, `redirectURL`. Per-item errors add `recordName` or `zoneID` around them.
    func writeMembers(to w: inout JSONWriter) {
        w.member("uuid", UUID().uuidString.lowercased())
        w.member("serverErrorCode", serverErrorCode)
        w.member("reason", reason)
        if let redirectURL { w.member("redirectURL", redirectURL) }
    }

    /// The whole HTTP response for this error: `{uuid, serverErrorCode, reason, redirectURL?}`.
    var response: HTTPResponse {
        var w = JSONWriter()
        w.object { w in writeMembers(to: &w) }
        return HTTPResponse(status: status, body: w.bytes)
    }
}
