import CloudletCore
import Foundation

extension CloudletStore {
    /// At open (read-write, not a cluster replica): brings the catalog's shares in line with the zones' `cloudkit.share` records, which are
    /// the truth (``Database/commitShares(_:_:)``). The two logs are fsynced apart, so a crash can leave either one
    /// ahead: a share record whose catalog copy was lost is copied in; a catalog share whose record commit was lost
    /// (or whose record is deleted) goes, or takes its record's version. A share the catalog has from before shares
    /// were records (no record LSN) and no record stands for is migrated: written as its record, once. Users whose
    /// access this changes get access events (what their shared database's feed reports). Blocking.
    /// Returns how many shares were repaired and how many migrated.
    @discardableResult
    func reconcileShareRecords() throws -> (repaired: Int, migrated: Int) {
        // A cluster replica writes nothing of its own: its partitions and catalog follow their leaders' logs verbatim
        // (and its catalog may trail its partitions until it catches up). Its leader repairs through the replicated
        // logs once it leads them all (``reconcileShareRecordsAsLeader()``).
        guard !configuration.readOnly, !configuration.replicated else { return (0, 0) }
        let catalogShares = catalog.snapshot().shares
        var fixes: [Mutation] = []
        var repaired = 0
        var migrated = 0
        for p in partitions {
            let found = try p.state.withLock { st in try shareRepairs(of: p, st, against: catalogShares) }
            fixes += found.fixes
            repaired += found.repaired
            for (zone, share) in found.unrecorded {
                let (written, lsn) = try writeShareRecord(share, in: zone, partition: p)
                fixes.append(.security(.share(.recorded(zone, written, lsn: lsn))))
                migrated += 1
            }
        }
        guard !fixes.isEmpty else { return (0, 0) }
        let (_, version) = try catalog.commit { _ in (fixes, ()) }
        try catalog.waitDurableBlocking(version)
        if repaired > 0 { StoreLog.warning("repaired \(repaired) share(s) in the catalog from their zones' share records (a crash came between the two)") }
        if migrated > 0 { StoreLog.note("migrated \(migrated) share(s) to share records in their zones") }
        return (repaired, migrated)
    }

    /// The open-time repair (``reconcileShareRecords()``) on a cluster's leader, through its replicated logs: run when
    /// the node has come to lead every partition and the catalog (a leader that crashed between the two logs' commits,
    /// or a follower promoted with its catalog behind its partitions, left the catalog's copy of some shares out of
    /// line with their records), so that the fixes replicate and every replica's catalog follows the share records.
    /// Each partition is compared with the newest staged catalog under its writer lock, and the fixes are staged
    /// there (as a share commit's copy is), so that no share commit racing the repair can be undone by it. Shares
    /// from before share records are not migrated here (an open outside a cluster does it). Returns how many shares
    /// were repaired, once the fixes are durable (acknowledged as the catalog's commits are).
    /// - Throws: what a commit throws on a node that stopped leading meanwhile (the next leader runs it again).
    @discardableResult
    public func reconcileShareRecordsAsLeader() async throws -> Int {
        try checkOpen()
        var repaired = 0
        var version: UInt64 = 0
        let catalog = self.catalog
        for p in partitions {
            let (n, v) = try await p.commit(waitingForRoom: { st, _ -> ([Mutation], (Int, UInt64)) in
                let (n, v) = try catalog.commitStaged { staged -> ([Mutation], Int) in
                    let found = try self.shareRepairs(of: p, st, against: staged.shares)
                    return (found.fixes, found.repaired)
                }
                return ([], (n, v))
            }).result
            repaired += n
            version = max(version, v)
        }
        guard repaired > 0 else { return 0 }
        try await catalog.waitDurable(version)
        StoreLog.warning("repaired \(repaired) share(s) in the catalog from their zones' share records, as the cluster's new leader")
        return repaired
    }

    /// What brings `catalogShares`' copy of the shares of partition `p`'s zones (state `st`, under its lock) in line
    /// with their share records: the catalog mutations (copies, deletions, and access events for the users this
    /// changes), how many shares they repair, and the shares the catalog has from before share records (no record
    /// LSN) that no record stands for (to write as their records).
    private func shareRepairs(
        of p: Partition, _ st: PartitionState, against catalogShares: ShareCatalog
    ) throws -> (fixes: [Mutation], repaired: Int, unrecorded: [(ZoneKey, Share)]) {
        var fixes: [Mutation] = []
        var repaired = 0
        var unrecorded: [(ZoneKey, Share)] = []
        let last = st.lastLSN
        func access(from old: Share?, to new: Share?, _ zone: ZoneKey) -> [Mutation] {
            let users = Set((old?.participants ?? []).map(\.userRecordName) + (new?.participants ?? []).map(\.userRecordName))
            return users.sorted().compactMap { u in
                let before = old.map { $0.permission(of: u) != .none } ?? false
                let after = new.map { $0.permission(of: u) != .none } ?? false
                return before == after ? nil : .security(.share(.access(zone, user: u, lsn: last, gone: !after)))
            }
        }
        // The catalog's shares, against their records.
        let zones = catalogShares.shares.keys.filter { partition(for: $0) === p }.sorted { $0.description < $1.description }
        for zone in zones {
            let byName = catalogShares.shares(in: zone)
            for name in byName.keys.sorted() {
                let old = byName[name]!
                let recordedLSN = catalogShares.recorded[zone]?[name]
                let entry = try st.entry(zone, name)
                if let e = entry, !e.deleted, e.recordType == Share.recordType {
                    guard recordedLSN != e.lsn || old.changeTag != e.changeTag else { continue }
                    let found = try Share(record: try p.readDurable(zone, name, e, retry: false))
                    fixes += access(from: old, to: found, zone) + [.security(.share(.recorded(zone, found, lsn: e.lsn)))]
                    repaired += 1
                } else if recordedLSN == nil, let e = entry, !e.deleted {
                    // A share from before share records whose name a record of another type took: it cannot be written
                    // as its record; it stays in the catalog only (as it was) and is reported.
                    StoreLog.warning(
                        "share '\(name)' of \(zone) predates share records and record '\(name)' (\(e.recordType)) has its name: "
                            + "it stays in the catalog only, out of the zone's change feed")
                } else if recordedLSN == nil && st.zone(zone) != nil {
                    unrecorded.append((zone, old))
                } else {
                    fixes += access(from: old, to: nil, zone) + [.security(.share(.delete(zone, recordName: name)))]
                    repaired += 1
                }
            }
        }
        // Share records the catalog lacks (their catalog commit was lost): one look at the type index per zone.
        for zone in st.keys.zoneKeys {
            for name in try st.keys.names(ofType: Share.recordType, in: zone) where catalogShares.shares(in: zone)[name] == nil {
                guard let e = try st.entry(zone, name), !e.deleted else { continue }
                let found = try Share(record: try p.readDurable(zone, name, e, retry: false))
                fixes += access(from: nil, to: found, zone) + [.security(.share(.recorded(zone, found, lsn: e.lsn)))]
                repaired += 1
            }
        }
        return (fixes, repaired, unrecorded)
    }

    /// Writes share `s` (saved before shares were records) as its record in `zone` and waits until it is durable: the
    /// share as written and the commit's LSN.
    private func writeShareRecord(_ s: Share, in zone: ZoneKey, partition p: Partition) throws -> (Share, UInt64) {
        let stamp = RecordStamp(
            timestamp: Int64((Date().timeIntervalSince1970 * 1000).rounded()), userRecordName: s.owner, deviceID: configuration.deviceID)
        let (written, lsn) = try p.commit { _, lsn -> ([Mutation], Share) in
            var w = s
            w.changeTag = ChangeTag.make(lsn: lsn, index: 0)
            let record = w.record(changeTag: w.changeTag!, created: stamp, modified: stamp)
            return ([.putRecord(zone: zone, record: record, encoded: RecordCodec.encode(record))], w)
        }
        try p.log.waitDurableBlocking(lsn!)
        return (written, lsn!)
    }
}
