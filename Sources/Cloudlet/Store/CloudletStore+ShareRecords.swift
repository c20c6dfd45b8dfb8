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
        // (and its catalog may trail its partitions until it catches up).
        guard !configuration.readOnly, !configuration.replicated else { return (0, 0) }
        let catalogShares = catalog.snapshot().shares
        var fixes: [Mutation] = []
        var repaired = 0
        var migrated = 0
        func access(from old: Share?, to new: Share?, _ zone: ZoneKey, lsn: UInt64) -> [Mutation] {
            let users = Set((old?.participants ?? []).map(\.userRecordName) + (new?.participants ?? []).map(\.userRecordName))
            return users.sorted().compactMap { u in
                let before = old.map { $0.permission(of: u) != .none } ?? false
                let after = new.map { $0.permission(of: u) != .none } ?? false
                return before == after ? nil : .security(.share(.access(zone, user: u, lsn: lsn, gone: !after)))
            }
        }
        // The catalog's shares, against their records.
        for zone in catalogShares.shares.keys.sorted(by: { $0.description < $1.description }) {
            let p = partition(for: zone)
            let byName = catalogShares.shares(in: zone)
            for name in byName.keys.sorted() {
                let old = byName[name]!
                let recordedLSN = catalogShares.recorded[zone]?[name]
                let (entry, zoneExists, last) = try p.state.withLock { st in (try st.entry(zone, name), st.zone(zone) != nil, st.lastLSN) }
                if let e = entry, !e.deleted, e.recordType == Share.recordType {
                    guard recordedLSN != e.lsn || old.changeTag != e.changeTag else { continue }
                    let found = try Share(record: try p.readDurable(zone, name, e))
                    fixes += access(from: old, to: found, zone, lsn: last) + [.security(.share(.recorded(zone, found, lsn: e.lsn)))]
                    repaired += 1
                } else if recordedLSN == nil, let e = entry, !e.deleted {
                    // A share from before share records whose name a record of another type took: it cannot be written
                    // as its record; it stays in the catalog only (as it was) and is reported.
                    StoreLog.warning(
                        "share '\(name)' of \(zone) predates share records and record '\(name)' (\(e.recordType)) has its name: "
                            + "it stays in the catalog only, out of the zone's change feed")
                } else if recordedLSN == nil && zoneExists {
                    let (written, lsn) = try writeShareRecord(old, in: zone, partition: p)
                    fixes.append(.security(.share(.recorded(zone, written, lsn: lsn))))
                    migrated += 1
                } else {
                    fixes += access(from: old, to: nil, zone, lsn: last) + [.security(.share(.delete(zone, recordName: name)))]
                    repaired += 1
                }
            }
        }
        // Share records the catalog lacks (their catalog commit was lost): one look at the type index per zone.
        for p in partitions {
            let (zones, last) = p.state.withLock { st in (Array(st.keys.zoneKeys), st.lastLSN) }
            for zone in zones {
                let names = try p.state.withLock { try $0.keys.names(ofType: Share.recordType, in: zone) }
                for name in names where catalogShares.shares(in: zone)[name] == nil {
                    guard let e = try p.state.withLock({ try $0.entry(zone, name) }), !e.deleted else { continue }
                    let found = try Share(record: try p.readDurable(zone, name, e))
                    fixes += access(from: nil, to: found, zone, lsn: last) + [.security(.share(.recorded(zone, found, lsn: e.lsn)))]
                    repaired += 1
                }
            }
        }
        guard !fixes.isEmpty else { return (0, 0) }
        let (_, version) = try catalog.commit { _ in (fixes, ()) }
        try catalog.waitDurableBlocking(version)
        if repaired > 0 { StoreLog.warning("repaired \(repaired) share(s) in the catalog from their zones' share records (a crash came between the two)") }
        if migrated > 0 { StoreLog.note("migrated \(migrated) share(s) to share records in their zones") }
        return (repaired, migrated)
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
