import CloudletCore

/// The one table of how Cloudlet's errors meet CloudKit Web Services: each ``CloudletError/Code`` → the
/// `serverErrorCode` a response carries, and each `serverErrorCode` → its HTTP status (CloudKit's table,
/// `reference/cloudkit.md` §1.15). Several codes share a `serverErrorCode` (`BAD_REQUEST` covers bad arguments,
/// limits and bad containers); an error dictionary therefore also carries Cloudlet's own code as
/// `cloudletErrorCode`, which CloudKit clients ignore and Cloudlet's client reads back exactly.
public enum ErrorTable {
    /// `serverErrorCode` for every code. A code missing here fails to compile nowhere, so
    /// `ErrorTableTests` walks ``CloudletError/Code/allCases`` through it.
    static func serverErrorCode(_ code: CloudletError.Code) -> String {
        switch code {
        case .internalError, .corruption, .io, .partialFailure: "INTERNAL_ERROR"
        case .invalidArguments, .limitExceeded, .badContainer, .badDatabase, .notSupported: "BAD_REQUEST"
        case .unknownItem: "NOT_FOUND"
        case .serverRecordChanged: "CONFLICT"
        case .recordExists: "EXISTS"
        case .zoneNotFound: "ZONE_NOT_FOUND"
        case .batchRequestFailed: "ATOMIC_ERROR"
        case .referenceViolation: "VALIDATING_REFERENCE_ERROR"
        case .permissionFailure: "ACCESS_DENIED"
        case .changeTokenExpired: "CHANGE_TOKEN_EXPIRED"
        case .readOnly, .locked, .serviceUnavailable: "TRY_AGAIN_LATER"
        case .quotaExceeded: "QUOTA_EXCEEDED"
        case .authenticationFailed: "AUTHENTICATION_FAILED"
        case .authenticationRequired: "AUTHENTICATION_REQUIRED"
        default: "INTERNAL_ERROR"
        }
    }

    /// The HTTP status CloudKit uses for each `serverErrorCode`.
    public static let statuses: [String: Int] = [
        "ACCESS_DENIED": 403, "ATOMIC_ERROR": 400, "BAD_REQUEST": 400, "AUTHENTICATION_FAILED": 401,
        "AUTHENTICATION_REQUIRED": 421, "CONFLICT": 409, "EXISTS": 409, "NOT_FOUND": 404, "ZONE_NOT_FOUND": 404,
        "QUOTA_EXCEEDED": 413, "THROTTLED": 429, "TRY_AGAIN_LATER": 503, "VALIDATING_REFERENCE_ERROR": 412,
        "INTERNAL_ERROR": 500, "CHANGE_TOKEN_EXPIRED": 400,
    ]

    /// The code a `serverErrorCode` stands for when a response does not say `cloudletErrorCode` (a CloudKit
    /// server, or an error the router produced).
    public static func code(serverErrorCode: String) -> CloudletError.Code {
        switch serverErrorCode {
        case "ACCESS_DENIED": .permissionFailure
        case "ATOMIC_ERROR": .batchRequestFailed
        case "AUTHENTICATION_FAILED": .authenticationFailed
        case "AUTHENTICATION_REQUIRED": .authenticationRequired
        case "CONFLICT": .serverRecordChanged
        case "EXISTS": .recordExists
        case "NOT_FOUND": .unknownItem
        case "ZONE_NOT_FOUND": .zoneNotFound
        case "QUOTA_EXCEEDED": .quotaExceeded
        case "THROTTLED", "TRY_AGAIN_LATER": .serviceUnavailable
        case "VALIDATING_REFERENCE_ERROR": .referenceViolation
        case "CHANGE_TOKEN_EXPIRED": .changeTokenExpired
        case "BAD_REQUEST": .invalidArguments
        default: .internalError
        }
    }
}

extension CloudletError.Code {
    /// The CloudKit Web Services `serverErrorCode` for this code (``ErrorTable``).
    public var serverErrorCode: String { ErrorTable.serverErrorCode(self) }
    /// The HTTP status of a response failing with this code as a whole.
    public var httpStatus: Int { ErrorTable.statuses[serverErrorCode] ?? 400 }
}
