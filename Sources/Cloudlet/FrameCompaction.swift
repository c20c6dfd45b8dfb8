import CloudletCore
import CloudletStorage

/// What compaction does with one commit frame, given the partition's state: which mutations are live
/// (``PartitionState/isLive(_:lsn:index:)``), and so whether the frame is dropped (nothing live), copied byte for
/// byte (everything it holds is live) or rewritten with only its live mutations (the others become skipped runs, so
/// that every kept mutation keeps its index in the commit). Shared by online compaction, `cloudlet-tool compact
/// --dry-run` and `stats`.
struct FrameCompaction {
    enum Action {
        case drop
        case copy
        /// The frame's live mutations, to be encoded as a new payload.
        case rewrite(Commit)
    }

    let frame: StoredFrame
    let payload: [UInt8]
    let commit: Commit
    let slots: [Int: Commit.Slot]
    let sizes: [UInt32]
    /// Per mutation (by position in `commit.mutations`): live or not.
    let live: [Bool]

    /// Decodes the frame and decides. Throws `.corruption` for a frame that is not a valid commit.
    init(_ frame: StoredFrame, state: PartitionState) throws {
        guard frame.type == Commit.frameType else {
            throw CloudletError.corruption(
                "segment \(frame.path) offset \(frame.position.offset): frame LSN \(frame.lsn) has unknown type \(frame.type)")
        }
        self.frame = frame
        payload = try frame.payload()
        do {
            (commit, slots, sizes) = try Commit.decode(payload)
        } catch let e as CloudletError {
            throw CloudletError.corruption(
                "segment \(frame.path) offset \(frame.position.offset): frame LSN \(frame.lsn): \(e.message)")
        }
        var live: [Bool] = []
        live.reserveCapacity(commit.mutations.count)
        for (k, m) in commit.mutations.enumerated() {
            live.append(state.isLive(m, lsn: frame.lsn, index: commit.index(k)))
        }
        self.live = live
    }

    var liveCount: Int { live.reduce(0) { $0 + ($1 ? 1 : 0) } }

    var action: Action {
        let n = liveCount
        if n == 0 { return .drop }
        if n == live.count { return .copy }
        var kept: [Mutation] = []
        var indices: [UInt32] = []
        for (k, m) in commit.mutations.enumerated() where live[k] {
            if case .putRecord(let z, let r, _) = m, let slot = slots[k] {
                // The record's bytes as written: a rewrite never re-encodes a record.
                let bytes = Array(payload[Int(slot.offset)..<Int(slot.offset + slot.length)])
                kept.append(.putRecord(zone: z, record: r, encoded: bytes))
            } else {
                kept.append(m)
            }
            indices.append(commit.index(k))
        }
        return .rewrite(Commit(mutations: kept, indices: indices, count: commit.count))
    }

    /// The bytes each mutation keeps alive in the frame as it is.
    var costs: [UInt32] { Commit.costs(sizes: sizes, frameLength: frame.position.length) }
}

/// Where compaction moved the live mutations of the frames it kept, to be applied to the partition's state when
/// the new segments are swapped in.
struct CompactionMoves {
    struct RecordMove {
        var zone: ZoneKey
        var name: String
        var change: ChangePoint
        var position: FramePosition
        var slot: Commit.Slot
        var cost: UInt32
    }

    var records: [RecordMove] = []
    var creations: [(zone: ZoneKey, lsn: UInt64, span: LiveSpan)] = []
    var deletions: [(zone: ZoneKey, lsn: UInt64, span: LiveSpan)] = []
    /// Schema changes and purges: live forever.
    var permanent: [LiveSpan] = []

    /// Notes where the mutations of `commit` (the frame as written to the new segments, at `position`) went.
    mutating func note(_ commit: Commit, lsn: UInt64, position: FramePosition, slots: [Int: Commit.Slot], costs: [UInt32]) {
        for (k, m) in commit.mutations.enumerated() {
            let cost = k < costs.count ? costs[k] : 0
            let change = ChangePoint(lsn: lsn, index: commit.index(k))
            switch m {
            case .putRecord(let z, let r, _):
                records.append(
                    RecordMove(zone: z, name: r.recordName, change: change, position: position, slot: slots[k]!, cost: cost))
            case .deleteRecord(let z, let name, _, _):
                records.append(
                    RecordMove(
                        zone: z, name: name, change: change, position: position, slot: Commit.Slot(offset: 0, length: 0),
                        cost: cost))
            case .createZone(let z): creations.append((z, lsn, LiveSpan(segment: position.segment, cost: cost)))
            case .deleteZone(let z, _): deletions.append((z, lsn, LiveSpan(segment: position.segment, cost: cost)))
            case .schemaField, .schemaReset, .purge: permanent.append(LiveSpan(segment: position.segment, cost: cost))
            }
        }
    }

    /// Points the state at the new segments: every moved mutation that is still current gets its new position and
    /// counts as live there; the replaced segments' accounting is dropped. Runs under the partition's lock.
    func apply(to st: inout PartitionState, coveredThrough: UInt64, generation: UInt32) {
        st.segmentLive = st.segmentLive.filter { $0.key > coveredThrough }
        func live(_ span: LiveSpan) { st.segmentLive[span.segment, default: 0] += Int64(span.cost) }
        for m in records where st.zones[m.zone]?.move(m.name, m.change, to: m.position, slot: m.slot, cost: m.cost) == true {
            live(LiveSpan(segment: m.position.segment, cost: m.cost))
        }
        for c in creations where st.zones[c.zone]?.createdLSN == c.lsn {
            st.zoneCreations[c.zone] = c.span
            live(c.span)
        }
        for d in deletions where st.deletedZones[d.zone]?.lsn == d.lsn {
            st.zoneDeletions[d.zone] = d.span
            live(d.span)
        }
        for p in permanent { live(p) }
        st.compactionGeneration = generation
    }
}
