import CloudletCore
import Testing

@testable import Cloudlet

/// The commit payload has one reader (``CommitPayloadReader``): `Commit.decode` and `CommitOutline.parse` find the
/// same mutations at the same places for every ``MutationKind``, and both refuse a byte that is no kind.
@Suite struct CommitPayloadReaderTests {
    static let database = DatabaseID(
        container: testContainer, environment: .development, scope: .private, owner: "alice")
    static let zone = ZoneKey(database: database, zoneName: "Work")
    static let schema = SchemaKey(container: testContainer, environment: .development)
    static let who = SubscriberID(database: database, user: "alice")

    /// A mutation of `kind`; nil for `.skipped`, which is no mutation (a commit writes it for the gaps in its
    /// indices).
    static func sample(_ kind: MutationKind) -> Mutation? {
        switch kind {
        case .putRecord:
            .putRecord(
                zone: zone,
                record: Record(
                    recordType: "Note", recordName: "n1", zoneID: zone.zoneID, fields: ["title": .string("x")]),
                encoded: [])
        case .deleteRecord: .deleteRecord(zone: zone, recordName: "n2", recordType: "Note", time: 1_700_000_000_000)
        case .deleteChild: .deleteRecord(zone: zone, recordName: "n3", recordType: "Note", time: 1_700_000_000_000, parent: "n1")
        case .createZone: .createZone(zone)
        case .deleteZone: .deleteZone(ZoneKey(database: database, zoneName: "Old"), time: 1_700_000_000_000)
        case .schemaField: .schemaField(schema, recordType: "Note", field: "title", type: FieldType(.string))
        case .schemaReset: .schemaReset(container: testContainer)
        case .purge: .purge(through: 7)
        case .index:
            .index(.define(IndexDefinition(schema: schema, recordType: "Note", field: "title", kind: .ordered)))
        case .skipped: nil
        case .catalogVersion: .catalogVersion(3)
        case .saveSubscription: .saveSubscription(who, Subscription(id: "s", kind: .database))
        case .deleteSubscription: .deleteSubscription(who, id: "s")
        case .security: .security(.grants(schema, recordType: "Note", grants: ["_world": .read, "Editors": [.read, .write]]))
        }
    }

    @Test func decodeAndOutlineAgreeOnEveryKind() throws {
        let kinds = MutationKind.allCases.filter { $0 != .skipped }
        let mutations = kinds.map { Self.sample($0)! }
        // Indices 1, 3, 5…: a skipped run of one before every mutation and after the last.
        let indices = mutations.indices.map { UInt32(2 * $0 + 1) }
        let written = Commit(mutations: mutations, indices: indices, count: 2 * mutations.count + 1)
        let (payload, writtenSlots, writtenSizes) = written.encode()

        let (commit, slots, sizes) = try Commit.decode(payload)
        let outline = try CommitOutline.parse(payload)
        #expect(commit.count == written.count)
        #expect(outline.count == written.count)
        #expect(commit.mutations.map(\.kind) == kinds)
        #expect(outline.entries.map(\.kind) == kinds)
        #expect(sizes == writtenSizes)
        #expect(slots == writtenSlots)
        try #require(outline.entries.count == commit.mutations.count)
        // After the header come a skipped run of one before each mutation and one after the last.
        let skip = [MutationKind.skipped.rawValue, 1]
        var end = payload.count - sizes.reduce(0) { $0 + Int($1) } - skip.count * (mutations.count + 1)
        for (k, e) in outline.entries.enumerated() {
            let m = commit.mutations[k]
            #expect(e.index == commit.index(k) && e.index == indices[k], "\(e.kind)")
            #expect(e.kind == m.kind)
            // The entry's bytes are what decode counted for the mutation, right after the skipped run before it.
            #expect(Array(payload[end..<end + skip.count]) == skip, "\(e.kind)")
            #expect(e.range == end + skip.count..<end + skip.count + Int(sizes[k]), "\(e.kind)")
            #expect(payload[e.range.lowerBound] == e.kind.rawValue)
            #expect(e.slot == slots[k], "\(e.kind)")
            if let slot = e.slot { #expect(Int(slot.offset + slot.length) == e.range.upperBound) }
            #expect((e.zone != nil) == e.kind.hasZone, "\(e.kind)")
            #expect(e.legacyCatalog == m.isCatalogMutation, "\(e.kind)")
            switch m {
            case .putRecord(_, let record, _): #expect(e.name == record.recordName)
            case .deleteRecord(_, let name, _, _, _): #expect(e.name == name)
            default: #expect(e.name == nil, "\(e.kind)")
            }
            end = e.range.upperBound
        }
        #expect(Array(payload[end...]) == skip)
        // What decode read is what was written.
        #expect(Commit(mutations: commit.mutations, indices: indices, count: commit.count).encode().payload == payload)
    }

    @Test func everyByteThatIsNoKindIsCorruption() throws {
        let payload = Commit(mutations: [.purge(through: 7)]).encode().payload
        let at = try CommitOutline.parse(payload).entries[0].range.lowerBound
        let bytes = (0...255).map(UInt8.init).filter { MutationKind(rawValue: $0) == nil }
        #expect(bytes.count == 256 - MutationKind.allCases.count)
        for byte in bytes {
            var bad = payload
            bad[at] = byte
            let message = "commit payload: unknown mutation kind \(byte)"
            let decodeError = #expect(throws: CloudletError.self) { try Commit.decode(bad) }
            #expect(decodeError?.code == .corruption && decodeError?.message == message)
            let parseError = #expect(throws: CloudletError.self) { try CommitOutline.parse(bad) }
            #expect(parseError?.code == .corruption && parseError?.message == message)
        }
    }
}
