/// The one error type of Cloudlet's engine: a code, a message naming what failed and why, and an optional cause.
///
/// Codes start from LevelDB's status set (notFound, corruption, invalidArgument, io, notSupported) plus CloudKit's
/// `CKError.Code`s; each maps onto a Web Services `serverErrorCode` at the server edge (the
/// table is `ErrorTable` in the wire module). Match with `catch let e as CloudletError where e.code == .serverRecordChanged`.
public struct CloudletError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure. Extensible: a struct over a private enum, so adding codes is not source-breaking.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable, CaseIterable {
            case internalError, invalidArguments, unknownItem, serverRecordChanged, recordExists
            case zoneNotFound, batchRequestFailed, referenceViolation, limitExceeded, permissionFailure
            case badContainer, badDatabase, changeTokenExpired, corruption, io, notSupported, readOnly, locked
            case partialFailure, quotaExceeded, authenticationFailed, authenticationRequired
            case serviceUnavailable
        }
        private let value: Value
        private init(_ v: Value) { value = v }

        /// Every code, for tables that must map each one (the wire module's error table and its test).
        public static let allCases: [Code] = Value.allCases.map(Code.init)

        /// The code whose ``description`` is `name` (`"zoneNotFound"`); nil for an unknown name.
        public init?(name: String) {
            guard let c = Self.allCases.first(where: { $0.description == name }) else { return nil }
            self = c
        }

        /// A bug or an unexpected state. CloudKit `internalError` (1) / `INTERNAL_ERROR`.
        public static let internalError = Code(.internalError)
        /// Bad input: a malformed name, a wrong field type, a missing change tag. `invalidArguments` (12) / `BAD_REQUEST`.
        public static let invalidArguments = Code(.invalidArguments)
        /// The record does not exist. `unknownItem` (11) / `NOT_FOUND`.
        public static let unknownItem = Code(.unknownItem)
        /// The change tag does not match the server's; carries the server record. `serverRecordChanged` (14) / `CONFLICT`.
        public static let serverRecordChanged = Code(.serverRecordChanged)
        /// A create for a record that already exists. CloudKit reports it as `serverRecordChanged` natively and
        /// `EXISTS` on the Web Services; we keep it distinct.
        public static let recordExists = Code(.recordExists)
        /// The zone does not exist. `zoneNotFound` (26) / `ZONE_NOT_FOUND`.
        public static let zoneNotFound = Code(.zoneNotFound)
        /// An operation of an atomic batch that failed only because another did. `batchRequestFailed` (22) / `ATOMIC_ERROR`.
        public static let batchRequestFailed = Code(.batchRequestFailed)
        /// A VALIDATE reference to a missing record. `referenceViolation` (31) / `VALIDATING_REFERENCE_ERROR`.
        public static let referenceViolation = Code(.referenceViolation)
        /// Too many operations, a record too large. `limitExceeded` (27) / `LIMIT_EXCEEDED`→`BAD_REQUEST`.
        public static let limitExceeded = Code(.limitExceeded)
        /// Not allowed for this caller or database. `permissionFailure` (10) / `ACCESS_DENIED`.
        public static let permissionFailure = Code(.permissionFailure)
        /// Malformed or unknown container. `badContainer` (5) / `BAD_REQUEST`.
        public static let badContainer = Code(.badContainer)
        /// Operation not valid in this database (custom zone in public). `badDatabase` (24) / `BAD_REQUEST`.
        public static let badDatabase = Code(.badDatabase)
        /// Change token older than the retention horizon. `changeTokenExpired` (21) / `CHANGE_TOKEN_EXPIRED`.
        public static let changeTokenExpired = Code(.changeTokenExpired)
        /// Bytes on disk failed a checksum or could not be decoded. Never served. `INTERNAL_ERROR` at the edge.
        public static let corruption = Code(.corruption)
        /// The operating system refused an I/O call (ENOSPC, EIO…). `INTERNAL_ERROR` at the edge.
        public static let io = Code(.io)
        /// Not supported (yet, or in this configuration).
        public static let notSupported = Code(.notSupported)
        /// The store or partition is read-only (opened read-only, or after a failed fsync). `TRY_AGAIN_LATER`.
        public static let readOnly = Code(.readOnly)
        /// Another process holds the store. `INTERNAL_ERROR`/`TRY_AGAIN_LATER` at the edge.
        public static let locked = Code(.locked)
        /// Some operations of a batch failed; see ``CloudletError/partialErrors``. `partialFailure` (2).
        public static let partialFailure = Code(.partialFailure)
        /// Over quota. `quotaExceeded` (25) / `QUOTA_EXCEEDED`.
        public static let quotaExceeded = Code(.quotaExceeded)
        /// Bad credentials. `AUTHENTICATION_FAILED`.
        public static let authenticationFailed = Code(.authenticationFailed)
        /// A user is needed. `AUTHENTICATION_REQUIRED`.
        public static let authenticationRequired = Code(.authenticationRequired)
        /// Temporarily unable to answer (an index still being built); retry shortly. `serviceUnavailable` (6) /
        /// `TRY_AGAIN_LATER`.
        public static let serviceUnavailable = Code(.serviceUnavailable)

        /// The native `CKError.Code` raw value closest to this code.
        public var ckErrorCode: Int {
            switch value {
            case .internalError, .corruption, .io: return 1
            case .partialFailure: return 2
            case .badContainer: return 5
            case .permissionFailure: return 10
            case .unknownItem: return 11
            case .invalidArguments, .notSupported: return 12
            case .serverRecordChanged, .recordExists: return 14
            case .readOnly, .locked, .serviceUnavailable: return 6
            case .changeTokenExpired: return 21
            case .batchRequestFailed: return 22
            case .badDatabase: return 24
            case .quotaExceeded: return 25
            case .zoneNotFound: return 26
            case .limitExceeded: return 27
            case .referenceViolation: return 31
            case .authenticationFailed, .authenticationRequired: return 9
            }
        }

        public var description: String {
            switch value {
            case .internalError: return "internalError"
            case .invalidArguments: return "invalidArguments"
            case .unknownItem: return "unknownItem"
            case .serverRecordChanged: return "serverRecordChanged"
            case .recordExists: return "recordExists"
            case .zoneNotFound: return "zoneNotFound"
            case .batchRequestFailed: return "batchRequestFailed"
            case .referenceViolation: return "referenceViolation"
            case .limitExceeded: return "limitExceeded"
            case .permissionFailure: return "permissionFailure"
            case .badContainer: return "badContainer"
            case .badDatabase: return "badDatabase"
            case .changeTokenExpired: return "changeTokenExpired"
            case .corruption: return "corruption"
            case .io: return "io"
            case .notSupported: return "notSupported"
            case .readOnly: return "readOnly"
            case .locked: return "locked"
            case .partialFailure: return "partialFailure"
            case .quotaExceeded: return "quotaExceeded"
            case .authenticationFailed: return "authenticationFailed"
            case .authenticationRequired: return "authenticationRequired"
            case .serviceUnavailable: return "serviceUnavailable"
            }
        }
    }

    public var code: Code
    /// Names what failed and why.
    public var message: String
    /// For ``Code/serverRecordChanged`` and ``Code/recordExists``: the record as the server has it now.
    public var serverRecord: Record?
    /// For ``Code/partialFailure``: the error of each failed item, by record name.
    public var partialErrors: [String: CloudletError]
    /// The underlying error, if any (an errno, a decoding failure).
    public var cause: (any Error & Sendable)?

    public init(
        _ code: Code, _ message: String, serverRecord: Record? = nil, partialErrors: [String: CloudletError] = [:],
        cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.serverRecord = serverRecord
        self.partialErrors = partialErrors
        self.cause = cause
    }

    public var description: String {
        var s = "\(code): \(message)"
        if let cause { s += " (cause: \(cause))" }
        return s
    }

    public static func corruption(_ message: String) -> CloudletError { CloudletError(.corruption, message) }
    public static func invalid(_ message: String) -> CloudletError { CloudletError(.invalidArguments, message) }
    public static func io(_ message: String, errno: Int32? = nil) -> CloudletError {
        CloudletError(.io, errno.map { "\(message): \(String(cString: strerrorText($0)))" } ?? message)
    }
}

#if canImport(Glibc)
import Glibc
private func strerrorText(_ e: Int32) -> UnsafeMutablePointer<CChar> { strerror(e) }
#endif

extension CloudletError.Code {
    /// Matches a thrown ``CloudletError`` by its code, so a catch clause can name the code:
    /// `catch CloudletError.Code.zoneNotFound { … }`.
    public static func ~= (code: CloudletError.Code, error: any Error) -> Bool {
        (error as? CloudletError)?.code == code
    }
}
