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
    /// The payload version written. Version 1 (one frame per batch, no user table) is still read.
    static let payloadVersion: UInt8 = 2
    /// A batch is split into frames of at most this many notifications…
    static let maxFrameNotifications = 1024
    /// …and about this many bytes of payload (a frame holds at least one notification, however large): a frame is
    /// what retention drops and what an open reads whole, so none may grow with the hub's backlog.
    static let maxFrameBytes = 1 << 20

    /// Flags of a version 2 frame: it continues the batch of the frame before / the batch goes on in the next one.
    static let continuesFlag: UInt8 = 1
    static let moreFlag: UInt8 = 2

    /// One batch of the hub (one or more frames).
    struct Batch {
        var incarnation: UInt64
        var time: Int64
        var cursors: [UInt64]
        var notifications: [(inbox: NotificationHub.Inbox, notification: RecordNotification)]
    }

    /// One user's notifications in a frame: how many, and the newest sequence.
    struct InboxCount: Equatable {
        var inbox: NotificationHub.Inbox
        var count: Int
        var last: UInt64
    }

    /// A frame's payload up to its notifications.
    struct Header {
        var incarnation: UInt64
        var time: Int64
        var flags: UInt8 = 0
        var cursors: [UInt64]
        /// The users the frame has notifications for, in order of their first one.
        var inboxes: [InboxCount] = []
        /// The sequences of its first and last notification (nil: a frame with only the cursor).
        var sequences: ClosedRange<UInt64>?
    }

    /// What the hub needs to know of each frame in the log, oldest first.
    struct FrameInfo {
        var lsn: UInt64
        var position: FramePosition
        var time: Int64
        /// The first sequence it numbered; nil for a frame with only the cursor.
        var firstSequence: UInt64?
    }

    /// What opening the log found.
    struct Recovered {
        var incarnation: UInt64?
        var lastSequence: UInt64 = 0
        var cursors: [UInt64]
        /// Per user, the newest notifications (at most the `keep` asked of ``open``), oldest first.
        var inboxes: [NotificationHub.Inbox: [RecordNotification]] = [:]
        /// Per user with older notifications in the log than those loaded: the newest of the older ones.
        var trimmed: [NotificationHub.Inbox: UInt64] = [:]
        /// Frames read at open (headers only), and those whose notifications were decoded.
        var framesScanned = 0
        var framesDecoded = 0
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

    /// Opens (creating if needed) the log in `directory` and recovers it: the newest cursor and sequence, and for
    /// every user the newest `keep` notifications. Reading every frame's header (not its notifications), then
    /// decoding frames newest first only while some user they hold still wants notifications, makes the work
    /// follow what is kept, not the log. The frames of a batch a crash cut short (no last frame) are ignored.
    /// Throws `.corruption` naming the segment and offset for a damaged frame.
    static func open(
        directory: String, configuration: StoreConfiguration, fileSystem: any FileSystem, partitions: Int, keep: Int = .max
    ) throws -> (NotificationLog, Recovered) {
        var logConfig = LogConfiguration()
        logConfig.durability = configuration.durability
        // Small enough that retention finds sealed segments to drop.
        logConfig.segmentSize = max(256 << 10, min(configuration.segmentSize, configuration.notificationLogSize / 8))
        var recovered = Recovered(cursors: Array(repeating: 0, count: partitions))
        var infos: [FrameInfo] = []
        var tables: [[InboxCount]] = []
        // The frames of the batch being read, until its last one.
        var pending: [(FrameInfo, Header)] = []
        let log = try Log.open(directory: directory, partition: logPartition, configuration: logConfig, fileSystem: fileSystem) { frame in
            let header = try withPlace(frame.position, lsn: frame.lsn) {
                guard frame.type == frameType else {
                    throw CloudletError.corruption("has type \(frame.type), not a notification batch (\(frameType))")
                }
                return try decodeHeader(frame.payload)
            }
            recovered.framesScanned += 1
            // A frame that begins a batch: the one before, if unfinished, was cut short by a crash.
            if header.flags & continuesFlag == 0 { pending.removeAll() }
            let info = FrameInfo(lsn: frame.lsn, position: frame.position, time: header.time, firstSequence: header.sequences?.lowerBound)
            pending.append((info, header))
            guard header.flags & moreFlag == 0 else { return }
            for (info, h) in pending {
                recovered.incarnation = h.incarnation
                for (p, c) in h.cursors.enumerated() where p < partitions { recovered.cursors[p] = max(recovered.cursors[p], c) }
                if let s = h.sequences { recovered.lastSequence = s.upperBound }
                infos.append(info)
                tables.append(h.inboxes)
            }
            pending.removeAll()
        }
        let opened = NotificationLog(log: log, frames: infos, maxBytes: configuration.notificationLogSize, maxAge: configuration.notificationRetention)
        do {
            try opened.loadNewest(keep: keep, infos: infos, tables: tables, into: &recovered)
        } catch {
            try? log.close()
            throw error
        }
        return (opened, recovered)
    }

    /// Runs `body`, naming the frame at `position` in a corruption it reports.
    private static func withPlace<T>(_ position: FramePosition, lsn: UInt64, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as CloudletError where e.code == .corruption {
            throw CloudletError.corruption(
                "notification log segment \(position.segment) offset \(position.offset): frame LSN \(lsn): \(e.message)")
        }
    }

    /// Fills `recovered.inboxes` and `.trimmed`, walking the frames newest first: a frame is decoded only when a
    /// user it holds has fewer than `keep` notifications so far; the walk stops once every user is full and knows
    /// the newest notification it leaves out.
    private func loadNewest(keep: Int, infos: [FrameInfo], tables: [[InboxCount]], into recovered: inout Recovered) throws {
        var wanted: [NotificationHub.Inbox: Int] = [:]
        for table in tables { for e in table where wanted[e.inbox] == nil { wanted[e.inbox] = keep } }
        var unresolved = wanted.count
        var newestFirst: [NotificationHub.Inbox: [RecordNotification]] = [:]
        for i in infos.indices.reversed() {
            guard unresolved > 0 else { break }
            guard keep > 0, tables[i].contains(where: { wanted[$0.inbox]! > 0 }) else {
                // Every user here is full: the newest of theirs in this frame is the newest left out.
                for e in tables[i] where recovered.trimmed[e.inbox] == nil {
                    recovered.trimmed[e.inbox] = e.last
                    unresolved -= 1
                }
                continue
            }
            let position = infos[i].position
            let batch = try Self.withPlace(position, lsn: infos[i].lsn) { try Self.decode(log.readFrame(at: position).payload) }
            recovered.framesDecoded += 1
            for (inbox, n) in batch.notifications.reversed() {
                if wanted[inbox, default: 0] > 0 {
                    newestFirst[inbox, default: []].append(n)
                    wanted[inbox]! -= 1
                } else if recovered.trimmed[inbox] == nil {
                    recovered.trimmed[inbox] = n.id.sequence
                    unresolved -= 1
                }
            }
        }
        for (inbox, list) in newestFirst { recovered.inboxes[inbox] = list.reversed() }
    }

    /// The oldest sequence the log keeps (`next` when it keeps no notification).
    func oldestSequence(next: UInt64) -> UInt64 {
        frames.withLock { $0.lazy.compactMap(\.firstSequence).first } ?? next
    }

    /// Writes a batch (in frames of bounded size) and waits until it is durable (the hub's thread: blocking).
    func write(_ batch: Batch) throws {
        var staged: [FrameInfo] = []
        for part in Self.encodeFrames(batch) {
            let (lsn, position) = try log.stage(type: Self.frameType, payload: part.payload)
            staged.append(FrameInfo(lsn: lsn, position: position, time: batch.time, firstSequence: part.firstSequence))
        }
        try log.waitCommittedBlocking(staged.last!.lsn)
        frames.withLock { $0 += staged }
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

    /// The frames of a batch: its notifications in order, at most ``maxFrameNotifications`` and about
    /// ``maxFrameBytes`` to a frame; each frame carries the batch's cursor, and flags saying where it is in the batch.
    static func encodeFrames(
        _ b: Batch, maxNotifications: Int = maxFrameNotifications, maxBytes: Int = maxFrameBytes
    ) -> [(payload: [UInt8], firstSequence: UInt64?)] {
        // Every notification encoded once, one after the other; a part is a range of them (and of these bytes).
        var body = ByteWriter(capacity: 64 + b.notifications.count * 96)
        var parts: [(items: Range<Int>, bytes: Range<Int>)] = []
        var first = 0, firstByte = 0
        for (i, (inbox, n)) in b.notifications.enumerated() {
            let before = body.count
            encode(n, of: inbox, into: &body)
            if i > first && (i - first >= maxNotifications || body.count - firstByte > maxBytes) {
                parts.append((first..<i, firstByte..<before))
                (first, firstByte) = (i, before)
            }
        }
        parts.append((first..<b.notifications.count, firstByte..<body.count))
        return parts.enumerated().map { k, part in
            let items = b.notifications[part.items]
            let inboxes = userTable(items.lazy.map { ($0.inbox, $0.notification.id.sequence) })
            let flags = (k > 0 ? continuesFlag : 0) | (k < parts.count - 1 ? moreFlag : 0)
            let sequences = items.isEmpty ? nil : items.first!.notification.id.sequence...items.last!.notification.id.sequence
            var w = ByteWriter(capacity: 64 + inboxes.count * 32 + part.bytes.count)
            encodeHeader(
                Header(incarnation: b.incarnation, time: b.time, flags: flags, cursors: b.cursors, inboxes: inboxes, sequences: sequences),
                into: &w)
            w.varint(items.count)
            w.raw(body.bytes[part.bytes])
            return (w.bytes, sequences?.lowerBound)
        }
    }

    /// The users of a frame's notifications (inbox and sequence, in order): how many each, and the newest.
    private static func userTable(_ items: some Sequence<(NotificationHub.Inbox, UInt64)>) -> [InboxCount] {
        var table: [InboxCount] = []
        var slot: [NotificationHub.Inbox: Int] = [:]
        for (inbox, sequence) in items {
            if let k = slot[inbox] {
                table[k].count += 1
                table[k].last = sequence
            } else {
                slot[inbox] = table.count
                table.append(InboxCount(inbox: inbox, count: 1, last: sequence))
            }
        }
        return table
    }

    /// `version u8 (2) · incarnation u64 · time svarint · flags u8 · partitions varint · cursor u64 each ·
    /// users varint · (container string · environment u8 · user string · count varint · last sequence varint) each ·
    /// first sequence varint · last sequence varint` (both 0 when the frame has no notification).
    static func encodeHeader(_ h: Header, into w: inout ByteWriter) {
        w.u8(payloadVersion)
        w.u64(h.incarnation)
        w.svarint(h.time)
        w.u8(h.flags)
        w.varint(h.cursors.count)
        for c in h.cursors { w.u64(c) }
        w.varint(h.inboxes.count)
        for e in h.inboxes {
            w.string(e.inbox.container)
            w.u8(e.inbox.environment == .production ? 1 : 0)
            w.string(e.inbox.user)
            w.varint(e.count)
            w.varint(e.last)
        }
        w.varint(h.sequences?.lowerBound ?? 0)
        w.varint(h.sequences?.upperBound ?? 0)
    }

    private static func encode(_ n: RecordNotification, of inbox: NotificationHub.Inbox, into w: inout ByteWriter) {
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

    /// A frame's header, reading only what comes before its notifications (a version 1 frame, which has no user
    /// table, is decoded whole).
    static func decodeHeader(_ payload: [UInt8]) throws -> Header {
        var r = ByteReader(payload, what: "notification batch")
        if payload.first == 1 {
            let batch = try decode(payload)
            var header = Header(
                incarnation: batch.incarnation, time: batch.time, cursors: batch.cursors,
                inboxes: userTable(batch.notifications.lazy.map { ($0.inbox, $0.notification.id.sequence) }))
            if let first = batch.notifications.first, let last = batch.notifications.last {
                header.sequences = first.notification.id.sequence...last.notification.id.sequence
            }
            return header
        }
        return try readHeader(&r)
    }

    private static func readHeader(_ r: inout ByteReader) throws -> Header {
        let version = try r.u8()
        guard version == 1 || version == payloadVersion else {
            throw CloudletError.corruption("notification batch: unknown version \(version)")
        }
        let incarnation = try r.u64()
        let time = try r.svarint()
        let flags = version == 1 ? 0 : try r.u8()
        guard flags & ~(continuesFlag | moreFlag) == 0 else { throw CloudletError.corruption("notification batch: unknown flags \(flags)") }
        var cursors: [UInt64] = []
        for _ in 0..<(try r.length(unit: 8)) { cursors.append(try r.u64()) }
        var header = Header(incarnation: incarnation, time: time, flags: flags, cursors: cursors)
        guard version > 1 else { return header }
        for _ in 0..<(try r.length(unit: 5)) {
            let container = try r.string()
            let environment: CloudletCore.Environment = try r.u8() == 1 ? .production : .development
            let user = try r.string()
            let count = try r.int()
            let last = try r.varint()
            header.inboxes.append(InboxCount(inbox: NotificationHub.Inbox(container: container, environment: environment, user: user), count: count, last: last))
        }
        let (first, last) = (try r.varint(), try r.varint())
        if !header.inboxes.isEmpty {
            guard first <= last else { throw CloudletError.corruption("notification batch: sequences \(first)…\(last)") }
            header.sequences = first...last
        }
        return header
    }

    static func decode(_ payload: [UInt8]) throws -> Batch {
        var r = ByteReader(payload, what: "notification batch")
        let header = try readHeader(&r)
        let incarnation = header.incarnation
        var notifications: [(inbox: NotificationHub.Inbox, notification: RecordNotification)] = []
        for _ in 0..<(try r.length()) {
            let sequence = try r.varint()
            let who = try SubscriberID.decode(&r)
            let partition = try r.int()
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
        if payload.first != 1 {
            // The user table must say what the notifications do (the open trusts it to skip frames).
            let counted = header.inboxes.reduce(0) { $0 + $1.count }
            guard counted == notifications.count, notifications.first?.notification.id.sequence == header.sequences?.lowerBound,
                notifications.last?.notification.id.sequence == header.sequences?.upperBound
            else { throw CloudletError.corruption("notification batch: its user table does not match its \(notifications.count) notifications") }
        }
        return Batch(incarnation: incarnation, time: header.time, cursors: header.cursors, notifications: notifications)
    }
}
