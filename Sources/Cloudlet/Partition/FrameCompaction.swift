import CloudletCore
import CloudletStorage

/// What compaction does with one commit frame, given the partition's state: which mutations are live
/// (``PartitionState/isLive(_:lsn:index:)``), and so whether the frame is dropped (nothing live), copied byte for
/// byte (everything it holds is live) or rewritten with only its live mutations (the others become skipped runs, so
/// that every kept mutation keeps its index in the commit). Shared by online compaction, `cloudlet-tool compact
/// --dry-run` and `stats`.
package struct FrameCompaction {
    package enum Action {
        case drop
        case copy
        /// A new payload holding the frame's live mutations, and where they sit in it.
        case rewrite(payload: [UInt8], entries: [CommitOutline.Entry])
    }

    let frame: StoredFrame
    let payload: [UInt8]
    package let outline: CommitOutline
    /// Per entry of `outline`: live or not.
    package let live: [Bool]

    /// Decompresses and outlines the frame (no record is decoded) and decides. Throws `.corruption` for a frame that
    /// is not a valid commit.
    package init(_ frame: StoredFrame, state: some PartitionReading) throws {
        guard frame.type == Commit.frameType else {
            throw CloudletError.corruption(
                "segment \(frame.path) offset \(frame.position.offset): frame LSN \(frame.lsn) has unknown type \(frame.type)")
        }
        self.frame = frame
        payload = try frame.payload()
        do {
            outline = try CommitOutline.parse(payload)
        } catch let e as CloudletError {
            throw CloudletError.corruption(
                "segment \(frame.path) offset \(frame.position.offset): frame LSN \(frame.lsn): \(e.message)")
        }
        live = try outline.entries.map { [outline, frame] e in try state.isLive(outline.liveTarget(e), lsn: frame.lsn, index: e.index) }
    }

    var liveCount: Int { live.reduce(0) { $0 + ($1 ? 1 : 0) } }

    package var action: Action {
        let n = liveCount
        if n == 0 { return .drop }
        if n == live.count { return .copy }
        let (payload, entries) = outline.rewrite(payload, keep: live)
        return .rewrite(payload: payload, entries: entries)
    }

    /// The bytes each entry keeps alive in the frame as it is.
    package var costs: [UInt32] { Commit.costs(sizes: outline.sizes, frameLength: frame.position.length) }
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
    /// Index definitions and purges: live forever.
    var permanent: [LiveSpan] = []
    /// Catalog-version marks kept (only the partition's current one is live).
    var marks: [(lsn: UInt64, span: LiveSpan)] = []

    /// Notes where the `entries` of a frame (as written to the new segments, at `position`; zones from
    /// `outline`) went.
    mutating func note(
        _ entries: [CommitOutline.Entry], of outline: CommitOutline, lsn: UInt64, position: FramePosition, costs: [UInt32]
    ) {
        for (k, e) in entries.enumerated() {
            let cost = k < costs.count ? costs[k] : 0
            let span = LiveSpan(segment: position.segment, cost: cost)
            switch e.kind {
            case .putRecord, .deleteRecord, .deleteChild:
                records.append(
                    RecordMove(
                        zone: outline.zones[e.zone!], name: e.name!, change: ChangePoint(lsn: lsn, index: e.index),
                        position: position, slot: e.slot ?? Commit.Slot(offset: 0, length: 0), cost: cost))
            case .createZone: creations.append((outline.zones[e.zone!], lsn, span))
            case .deleteZone: deletions.append((outline.zones[e.zone!], lsn, span))
            case .catalogVersion: marks.append((lsn, span))
            case .schemaField, .schemaReset, .purge, .index, .saveSubscription, .deleteSubscription, .security, .skipped:
                permanent.append(span)
            }
        }
    }

    /// Points the state at the new segments: every moved mutation that is still current gets its new position and
    /// counts as live there; the replaced segments' accounting is dropped. Runs under the partition's lock.
    func apply(to st: inout PartitionState, coveredThrough: UInt64, generation: UInt32) throws {
        st.segmentLive = st.segmentLive.filter { $0.key > coveredThrough }
        func live(_ span: LiveSpan) { st.segmentLive[span.segment, default: 0] += Int64(span.cost) }
        for m in records where try st.moveRecord(m.zone, m.name, m.change, to: m.position, slot: m.slot, cost: m.cost) {
            live(LiveSpan(segment: m.position.segment, cost: m.cost))
        }
        for c in creations where st.zone(c.zone)?.createdLSN == c.lsn {
            st.zoneCreations[c.zone] = c.span
            live(c.span)
        }
        for d in deletions where st.deletedZones[d.zone]?.lsn == d.lsn {
            st.zoneDeletions[d.zone] = d.span
            live(d.span)
        }
        for p in permanent { live(p) }
        for m in marks where st.catalogMark?.lsn == m.lsn {
            st.catalogMark!.span = m.span
            live(m.span)
        }
        st.compactionGeneration = generation
    }
}
