/// A filter over records: CloudKit's query predicates, in one model for both spellings — the Web Services
/// `filterBy` list and the NSPredicate-style format string (``Predicate/init(format:_:)``).
///
/// CloudKit ANDs comparisons and allows NOT in a few places; Cloudlet also has OR (and parentheses) in both
/// spellings.
public indirect enum Predicate: Sendable, Hashable {
    /// Every record (`TRUEPREDICATE`).
    case all
    /// No record (`FALSEPREDICATE`).
    case none
    case comparison(Comparison)
    case and([Predicate])
    case or([Predicate])
    case not(Predicate)

    /// The comparisons this predicate uses, in order.
    public var comparisons: [Comparison] {
        switch self {
        case .all, .none: []
        case .comparison(let c): [c]
        case .and(let ps), .or(let ps): ps.flatMap(\.comparisons)
        case .not(let p): p.comparisons
        }
    }
}

/// One comparison of a field with a value (a Web Services `filterBy` entry).
public struct Comparison: Sendable, Hashable {
    /// A record field, a system field (``SystemField``), or `___all` / `self` for full-text over every searchable field.
    public var field: String
    public var comparator: Comparator
    /// The operand: a scalar, or a list for IN / NOT_IN / LIST_CONTAINS_ANY / …; a location for NEAR.
    public var value: FieldValue
    /// For NEAR: the radius in kilometres.
    public var distance: Double?

    public init(_ field: String, _ comparator: Comparator, _ value: FieldValue, distance: Double? = nil) {
        self.field = SystemField(name: field)?.rawValue ?? field
        self.comparator = comparator
        self.value = value
        self.distance = distance
    }
}

/// The Web Services comparators.
public enum Comparator: String, Sendable, Hashable, CaseIterable {
    case equals = "EQUALS"
    case notEquals = "NOT_EQUALS"
    case lessThan = "LESS_THAN"
    case lessThanOrEquals = "LESS_THAN_OR_EQUALS"
    case greaterThan = "GREATER_THAN"
    case greaterThanOrEquals = "GREATER_THAN_OR_EQUALS"
    case near = "NEAR"
    case containsAllTokens = "CONTAINS_ALL_TOKENS"
    case containsAnyTokens = "CONTAINS_ANY_TOKENS"
    case `in` = "IN"
    case notIn = "NOT_IN"
    case listContains = "LIST_CONTAINS"
    case notListContains = "NOT_LIST_CONTAINS"
    case listContainsAny = "LIST_CONTAINS_ANY"
    case notListContainsAny = "NOT_LIST_CONTAINS_ANY"
    case listContainsAll = "LIST_CONTAINS_ALL"
    case notListContainsAll = "NOT_LIST_CONTAINS_ALL"
    case beginsWith = "BEGINS_WITH"
    case notBeginsWith = "NOT_BEGINS_WITH"
    case listMemberBeginsWith = "LIST_MEMBER_BEGINS_WITH"
    case notListMemberBeginsWith = "NOT_LIST_MEMBER_BEGINS_WITH"

    /// The comparator that matches exactly the records this one does not (among records that have the field).
    public var negated: Comparator? {
        switch self {
        case .equals: .notEquals
        case .notEquals: .equals
        case .lessThan: .greaterThanOrEquals
        case .lessThanOrEquals: .greaterThan
        case .greaterThan: .lessThanOrEquals
        case .greaterThanOrEquals: .lessThan
        case .in: .notIn
        case .notIn: .in
        case .listContains: .notListContains
        case .notListContains: .listContains
        case .listContainsAny: .notListContainsAny
        case .notListContainsAny: .listContainsAny
        case .listContainsAll: .notListContainsAll
        case .notListContainsAll: .listContainsAll
        case .beginsWith: .notBeginsWith
        case .notBeginsWith: .beginsWith
        case .listMemberBeginsWith: .notListMemberBeginsWith
        case .notListMemberBeginsWith: .listMemberBeginsWith
        case .near, .containsAllTokens, .containsAnyTokens: nil
        }
    }
}

/// System fields that predicates, sorts and indexes can use, by their Web Services names; the native and schema
/// language names are accepted too.
public enum SystemField: String, Sendable, CaseIterable {
    case recordName
    case createdTimestamp
    case modifiedTimestamp
    case createdUserRecordName
    case modifiedUserRecordName

    public init?(name: String) {
        switch name {
        case "recordName", "recordID", "___recordID": self = .recordName
        case "createdTimestamp", "creationDate", "___createTime": self = .createdTimestamp
        case "modifiedTimestamp", "modificationDate", "___modTime": self = .modifiedTimestamp
        case "createdUserRecordName", "creatorUserRecordID", "___createdBy": self = .createdUserRecordName
        case "modifiedUserRecordName", "lastModifiedUserRecordID", "___modifiedBy": self = .modifiedUserRecordName
        default: return nil
        }
    }

    /// The system field's value in a record.
    public func value(in r: Record) -> FieldValue? {
        switch self {
        case .recordName: .string(r.recordName)
        case .createdTimestamp: r.created.map { .timestamp($0.timestamp) }
        case .modifiedTimestamp: r.modified.map { .timestamp($0.timestamp) }
        case .createdUserRecordName: r.created.map { .string($0.userRecordName) }
        case .modifiedUserRecordName: r.modified.map { .string($0.userRecordName) }
        }
    }

    public var type: FieldType {
        switch self {
        case .createdTimestamp, .modifiedTimestamp: FieldType(.timestamp)
        default: FieldType(.string)
        }
    }
}

/// The field name full-text comparisons use to mean "every searchable string field" (`self CONTAINS 'x'`).
public let fullTextField = "___all"
