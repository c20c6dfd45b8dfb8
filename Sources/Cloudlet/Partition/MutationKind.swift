import CloudletCore

/// The byte that starts each mutation of a commit payload and says how its body is laid out
/// (docs/record-format.md, "Commit payload"). Strings are `length varint · UTF-8`; a zone index points into the
/// payload's zone table.
package enum MutationKind: UInt8, CaseIterable, Sendable {
    /// ``Mutation/putRecord(zone:record:encoded:)``: zone index varint · record length varint · record
    /// (``RecordCodec``).
    case putRecord = 1
    /// ``Mutation/deleteRecord(zone:recordName:recordType:time:)``: zone index varint · recordName string ·
    /// recordType string · deletion time svarint (ms).
    case deleteRecord = 2
    /// ``Mutation/deleteRecord(zone:recordName:recordType:time:parent:)`` with a parent: kind 2's body · parent
    /// string.
    case deleteChild = 11
    /// ``Mutation/createZone(_:)``: zone index varint.
    case createZone = 3
    /// ``Mutation/deleteZone(_:time:)``: zone index varint · deletion time svarint (ms).
    case deleteZone = 4
    /// ``Mutation/schemaField(_:recordType:field:type:)``: container string · environment u8 (1 production) ·
    /// recordType string · field string (empty: the type alone) · field type tag u8 (0: none).
    case schemaField = 5
    /// ``Mutation/schemaReset(container:)``: container string.
    case schemaReset = 6
    /// ``Mutation/purge(through:)``: through u64.
    case purge = 7
    /// ``Mutation/index(_:)``: an ``IndexMutation`` (sub-kind u8 · body).
    case index = 8
    /// A run of mutations compaction dropped: how many, varint ≥ 1. No ``Mutation``: the run only moves the
    /// index of the mutations after it.
    case skipped = 9
    /// ``Mutation/catalogVersion(_:)``: version varint.
    case catalogVersion = 10
    /// ``Mutation/saveSubscription(_:_:)``: subscriber (``SubscriberID``) · subscription.
    case saveSubscription = 20
    /// ``Mutation/deleteSubscription(_:id:)``: subscriber · subscription ID string.
    case deleteSubscription = 21
    /// ``Mutation/security(_:)``: a ``SecurityMutation`` (sub-kind u8 · body). Catalog log only.
    case security = 22

    /// The kind `byte` names; throws `.corruption` for a byte no kind has.
    init(byte: UInt8) throws {
        guard let kind = MutationKind(rawValue: byte) else {
            throw CloudletError.corruption("commit payload: unknown mutation kind \(byte)")
        }
        self = kind
    }

    /// Whether the mutation deletes a record (kinds 2 and 11).
    package var isRecordDeletion: Bool { self == .deleteRecord || self == .deleteChild }

    /// Whether the body starts with a zone index (kinds 1–4 and 11).
    var hasZone: Bool {
        switch self {
        case .putRecord, .deleteRecord, .deleteChild, .createZone, .deleteZone: true
        case .schemaField, .schemaReset, .purge, .index, .skipped, .catalogVersion, .saveSubscription,
            .deleteSubscription, .security:
            false
        }
    }
}

extension Mutation {
    /// The kind byte the mutation is written with.
    package var kind: MutationKind {
        switch self {
        case .putRecord: .putRecord
        case .deleteRecord(_, _, _, _, let parent): parent == nil ? .deleteRecord : .deleteChild
        case .createZone: .createZone
        case .deleteZone: .deleteZone
        case .schemaField: .schemaField
        case .schemaReset: .schemaReset
        case .purge: .purge
        case .index: .index
        case .catalogVersion: .catalogVersion
        case .saveSubscription: .saveSubscription
        case .deleteSubscription: .deleteSubscription
        case .security: .security
        }
    }
}
