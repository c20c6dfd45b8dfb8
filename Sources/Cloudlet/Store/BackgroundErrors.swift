import CloudletCore
import Foundation
import Synchronization

/// Work the engine does with no caller to tell of a failure: each has a name, the `job` label of the
/// `cloudlet_background_errors_total` metric.
public struct BackgroundJob: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The name, as in the metric's label.
    public let name: String
    private init(_ name: String) { self.name = name }

    /// A log's group commit (write, then fdatasync): its failure turns the partition (or the catalog) read-only.
    public static let flush = BackgroundJob("flush")
    /// A checkpoint written after every `checkpointInterval` bytes of log.
    public static let checkpoint = BackgroundJob("checkpoint")
    /// The purge of tombstones past the retention window, before each background checkpoint.
    public static let purge = BackgroundJob("purge")
    /// An automatic compaction, and the removal of the segments any compaction replaced.
    public static let compaction = BackgroundJob("compaction")
    /// The reading of a deleted record's last version for query subscriptions' notifications.
    public static let notification = BackgroundJob("notification")

    /// Every job, in the order the metrics list them.
    public static let allCases: [BackgroundJob] = [.flush, .checkpoint, .purge, .compaction, .notification]

    public var description: String { name }
    public static func < (a: BackgroundJob, b: BackgroundJob) -> Bool { a.name < b.name }
}

/// The failures of one background job in one place (a partition, the catalog) since the store was opened.
public struct BackgroundError: Sendable, Hashable {
    public var job: BackgroundJob
    /// Where it ran: `partition 0`, `catalog`.
    public var source: String
    /// How many times it failed.
    public var count: Int
    /// When it last failed, and why.
    public var time: Date
    public var message: String

    public init(job: BackgroundJob, source: String, count: Int, time: Date, message: String) {
        self.job = job
        self.source = source
        self.count = count
        self.time = time
        self.message = message
    }
}

/// The store's record of failed background work (``CloudletStore/statistics`` shows it, the server's metrics count
/// it): every failure is kept per job and source and written to standard error, never dropped.
package final class BackgroundErrors: Sendable {
    private struct Key: Hashable {
        var job: BackgroundJob
        var source: String
    }

    private let errors = Mutex<[Key: BackgroundError]>([:])

    package init() {}

    /// Notes that `job` failed in `source` with `error`, and says so on standard error.
    package func record(_ job: BackgroundJob, in source: String, _ error: any Error) {
        // A CloudletError's message names the failed call and its errno already; its cause would say it twice.
        let message = (error as? CloudletError).map { "\($0.code): \($0.message)" } ?? "\(error)"
        let now = Date()
        errors.withLock { all in
            let key = Key(job: job, source: source)
            var entry = all[key] ?? BackgroundError(job: job, source: source, count: 0, time: now, message: message)
            entry.count += 1
            entry.time = now
            entry.message = message
            all[key] = entry
        }
        StoreLog.warning("\(source): background \(job) failed: \(message)")
    }

    /// Every job and source that failed, by job then source.
    package var all: [BackgroundError] {
        errors.withLock { Array($0.values) }.sorted { ($0.job, $0.source) < ($1.job, $1.source) }
    }
}
