import CloudletCore
import CloudletStorage
import Foundation
import Synchronization

/// The durable notification log of a store (`DIR/notifications/`): what the notification hub has delivered, so that
/// a client reconnecting after a restart resumes with `after` and misses nothing still retained.
///
/// **Log.** The same segment files, frames, CRC32C, group commit and recovery as a partition's
/// (``CloudletStorage/Log``), stamped with partition ``logPartition``; each frame (type ``frameType``) is one batch of
/// the hub: the notifications it numbered, and for every data partition the LSN through which commits have been
/// matched (the cursor). The payload (docs/notifications.md, "Notification log"):
/// `version u8 (1) · incarnation u64 · time svarint (ms) · partitions varint · cursor u64 each · count varint ·
/// notification…`, a notification being `sequence varint · subscriber (SubscriberID encoding) · partition varint ·
/// lsn varint · subscriptionID string · reason u8 · recordName string · zoneName string · zoneOwner string ·
/// recordType string · fields varint · (name string · value) each · alertBody string`.
///
/// **Sequences.** Notification IDs are `incarnation-sequence` with one sequence for the whole log (dense, increasing
/// with the LSN of the frames). The incarnation is kept in every frame; an empty log gets a new one, so positions
/// from before are reported as a gap.
///
/// **Retention.** Sealed segments are compacted on the hub's thread: frames older than
/// ``StoreConfiguration/notificationRetention``, and the oldest beyond ``StoreConfiguration/notificationLogSize``
/// bytes, are dropped (the rest copied into a new generation, as partition compaction does). A position older than
/// the oldest sequence kept is a gap. The newest frame is always kept: it holds the cursor.
final class NotificationLog: Sendable {
    static let directoryName = "notifications"
    /// The partition number in the log's segment headers (the catalog's is 0xFFFF_FFFF; data partitions < 1024).
    static let logPartition: UInt32 = 0xFFFF_FFFE
    static let frameType: UInt8 = 3
    static let payloadVersion: UInt8 = 1

    /// One frame's contents.
    struct Batch {
        var incarnation: UInt64
        var time: Int64
        var cursors: [UInt64]
        var notifications: [(inbox: NotificationHub.Inbox, notification: RecordNotification)]
    }

    /// What the hub needs to know of each frame in the log, oldest first.
    struct FrameInfo {
        var lsn: UInt64
        var position: FramePosition
        var time: Int64
        /// The first sequence it numbered; nil for a frame with only the cursor.
        var firstSequence: UInt64?
    }

    /// What replaying the log found.
    struct Recovered {
        var incarnation: UInt64?
        var lastSequence: UInt64 = 0
        var cursors: [UInt64]
        var notifications: [(inbox: NotificationHub.Inbox, notification: RecordNotification)] = []
    }

    let log: Log
    private let frames: Mutex<[FrameInfo]>
    let maxBytes: Int
    let maxAge: Double

    private init(log: Log, frames: [FrameInfo], maxBytes: Int, maxAge: Double) {
        self.log = log
        self.frames = Mutex(frames)
        self.maxBytes = maxBytes
        self.maxAge = maxAge
    }

    /// Opens (creating if needed) the log in `directory` and replays it: every frame's notifications and the
    /// newest cursor. Throws `.corruption` naming the segment and offset for a damaged frame.
    static func open(directory: String, configuration: StoreConfiguration, fileSystem: any FileSystem, partitions: Int) throws
        -> (NotificationLog, Recovered)
    {
        var logConfig = LogConfiguration()
        logConfig.durability = configuration.durability
        // Small enough that retention finds sealed segments to drop.
        logConfig.segmentSize = max(256 << 10, min(configuration.segmentSize, configuration.notificationLogSize / 8))
        var recovered = Recovered(cursors: Array(repeating: 0, count: partitions))
        var infos: [FrameInfo] = []
        let log = try Log.open(directory: directory, partition: logPartition, configuration: logConfig, fileSystem: fileSystem) { frame in
            let place = "notification log segment \(frame.position.segment) offset \(frame.position.offset)"
            guard frame.type == frameType else {
                throw CloudletError.corruption("\(place): frame LSN \(frame.lsn) has type \(frame.type), not a notification batch (\(frameType))")
            }
            let batch: Batch
            do { batch = try decode(frame.payload) } catch let e as CloudletError {
                throw CloudletError.corruption("\(place): frame LSN \(frame.lsn): \(e.message)")
            }
            recovered.incarnation = batch.incarnation
            for (p, c) in batch.cursors.enumerated() where p < partitions { recovered.cursors[p] = max(recovered.cursors[p], c) }
            recovered.notifications += batch.notifications
            if let last = batch.notifications.last { recovered.lastSequence = last.notification.id.sequence }
            infos.append(FrameInfo(lsn: frame.lsn, position: frame.position, time: batch.time, firstSequence: batch.notifications.first?.notification.id.sequence))
        }
        return (NotificationLog(log: log, frames: infos, maxBytes: configuration.notificationLogSize, maxAge: configuration.notificationRetention), recovered)
    }

    /// The oldest sequence the log keeps (`next` when it keeps no notification).
    func oldestSequence(next: UInt64) -> UInt64 {
        frames.withLock { $0.lazy.compactMap(\.firstSequence).first } ?? next
    }

    /// Writes a batch and waits until it is durable (the hub's thread: blocking).
    func write(_ batch: Batch) throws {
        let (lsn, position) = try log.stage(type: Self.frameType, payload: Self.encode(batch))
        try log.waitCommittedBlocking(lsn)
        frames.withLock {
            $0.append(FrameInfo(lsn: lsn, position: position, time: batch.time, firstSequence: batch.notifications.first?.notification.id.sequence))
        }
    }

    /// Drops what retention no longer keeps (see the type's comment), when there is something to drop. Returns the
    /// oldest sequence still kept (nil: nothing was dropped; `next` when no kept frame holds a notification).
    func compact(now: Int64, next: UInt64) throws -> UInt64? {
        let segments = log.segments()
        let sealed = segments.prefix { $0.sealed }
        guard let lastSealed = sealed.last else { return nil }
        var total = segments.reduce(UInt64(0)) { $0 + $1.size }
        var cut: UInt64 = 0
        // Whole sealed segments, oldest first, while the log is over its size.
        for s in sealed where total > UInt64(maxBytes) {
            total -= s.size
            cut = s.lastLSN + 1
        }
        let infos = frames.withLock { $0 }
        let horizon = now - Int64(maxAge * 1000)
        for f in infos where f.lsn <= lastSealed.lastLSN && f.time < horizon { cut = max(cut, f.lsn + 1) }
        // The newest frame stays: it holds the cursor.
        if let last = infos.last { cut = min(cut, last.lsn) }
        guard let first = infos.first, cut > first.lsn else { return nil }
        guard let writer = try log.beginCompaction() else { return nil }
        var kept: [FrameInfo] = []
        do {
            for f in infos where f.lsn <= writer.coveredThrough && f.lsn >= cut {
                let frame = try log.readFrame(at: f.position)
                var moved = f
                moved.position = try writer.append(lsn: frame.lsn, epoch: frame.epoch, type: frame.type, payload: frame.payload)
                kept.append(moved)
            }
            try writer.finish()
            try log.installCompaction(writer)
        } catch {
            log.abandonCompaction(writer)
            throw error
        }
        let covered = writer.coveredThrough
        let remaining = frames.withLock { f -> [FrameInfo] in
            f = kept + f.filter { $0.lsn > covered }
            return f
        }
        return remaining.lazy.compactMap(\.firstSequence).first ?? next
    }

    func close() throws {
        try log.flush()
        try log.close()
    }

    // MARK: - Encoding

    static func encode(_ b: Batch) -> [UInt8] {
        var w = ByteWriter(capacity: 64 + b.notifications.count * 96)
        w.u8(payloadVersion)
        w.u64(b.incarnation)
        w.svarint(b.time)
        w.varint(b.cursors.count)
        for c in b.cursors { w.u64(c) }
        w.varint(b.notifications.count)
        for (inbox, n) in b.notifications {
            w.varint(n.id.sequence)
            SubscriberID(database: n.database, user: inbox.user).encode(into: &w)
            w.varint(n.partition)
            w.varint(n.lsn)
            w.string(n.subscriptionID)
            w.u8(n.reason == .recordCreated ? 1 : n.reason == .recordUpdated ? 2 : 3)
            w.string(n.recordID.recordName)
            w.string(n.recordID.zoneID.zoneName)
            w.string(n.recordID.zoneID.ownerName)
            w.string(n.recordType)
            w.varint(n.fields.count)
            for (name, value) in n.fields.sorted(by: { $0.key < $1.key }) {
                w.string(name)
                RecordCodec.encode(value, into: &w)
            }
            w.string(n.alertBody ?? "")
        }
        return w.bytes
    }

    static func decode(_ payload: [UInt8]) throws -> Batch {
        var r = ByteReader(payload, what: "notification batch")
        let version = try r.u8()
        guard version == payloadVersion else { throw CloudletError.corruption("notification batch: unknown version \(version)") }
        let incarnation = try r.u64()
        let time = try r.svarint()
        var cursors: [UInt64] = []
        for _ in 0..<(try r.length(unit: 8)) { cursors.append(try r.u64()) }
        var notifications: [(inbox: NotificationHub.Inbox, notification: RecordNotification)] = []
        for _ in 0..<(try r.length()) {
            let sequence = try r.varint()
            let who = try SubscriberID.decode(&r)
            let partition = Int(try r.varint())
            let lsn = try r.varint()
            let subscriptionID = try r.string()
            let reason: NotificationReason
            switch try r.u8() {
            case 1: reason = .recordCreated
            case 2: reason = .recordUpdated
            case 3: reason = .recordDeleted
            case let k: throw CloudletError.corruption("notification batch: unknown reason \(k)")
            }
            let recordName = try r.string()
            let zoneName = try r.string()
            let zoneOwner = try r.string()
            let recordType = try r.string()
            var fields: [String: FieldValue] = [:]
            for _ in 0..<(try r.length()) {
                let name = try r.string()
                fields[name] = try RecordCodec.decodeValue(&r)
            }
            let alert = try r.string()
            let inbox = NotificationHub.Inbox(container: who.database.container, environment: who.database.environment, user: who.user)
            notifications.append((inbox, RecordNotification(
                id: NotificationID(incarnation: incarnation, sequence: sequence), partition: partition, lsn: lsn,
                subscriptionID: subscriptionID, database: who.database, reason: reason,
                recordID: RecordID(recordName: recordName, zoneID: ZoneID(zoneName: zoneName, ownerName: zoneOwner)),
                recordType: recordType, fields: fields, alertBody: alert.isEmpty ? nil : alert)))
        }
        guard r.isAtEnd else { throw CloudletError.corruption("notification batch: \(r.remaining) bytes after the last notification") }
        return Batch(incarnation: incarnation, time: time, cursors: cursors, notifications: notifications)
    }
}
