import Cloudlet
import Glibc
import Synchronization

/// Request counters and latency histograms per route, rendered with the store's counters in the Prometheus text
/// format (`GET /cloudlet/metrics`).
///
/// | metric | type | labels |
/// |---|---|---|
/// | `cloudlet_http_requests_total` | counter | `route`, `status` |
/// | `cloudlet_http_request_duration_seconds` | histogram | `route` (from the request read to the response ready) |
/// | `cloudlet_http_requests_in_flight` | gauge | |
/// | `cloudlet_http_throttled_total` (rate limit), `cloudlet_quota_exceeded_total` (per-record `QUOTA_EXCEEDED`) | counter | |
/// | `cloudlet_store_commits_total`, `_fsyncs_total`, `_log_bytes_written_total`, `_cache_hits_total`, `_cache_misses_total` | counter | |
/// | `cloudlet_store_records`, `cloudlet_store_zones`, `cloudlet_store_frames_replayed` | gauge | |
/// | `cloudlet_store_write_stalls_total`, `cloudlet_store_write_stall_seconds_total` | counter | |
/// | `cloudlet_store_write_stalled` (partitions whose writes are stalled now), `cloudlet_store_memtable_bytes` | gauge | |
/// | `cloudlet_background_errors_total` | counter | `job` (`flush`, `checkpoint`, `purge`, `compaction`, `notification`) |
/// | `cloudlet_store_read_only` (1 while a partition or the catalog is read-only after a failed write), `cloudlet_store_recovery_findings` (damage the last open worked around) | gauge | |
/// | `cloudlet_notification_waiters` (long polls and websocket pushers waiting for a notification) | gauge | |
/// | `cloudlet_websocket_idle_wakeups_total` (websocket pushers that woke with nothing to send) | counter | |
/// | `cloudlet_uptime_seconds` | gauge | |
///
/// Route labels are a fixed set (``Route``), so the number of series is bounded whatever clients send.
final class Metrics: Sendable {
    /// Histogram bucket bounds, seconds.
    static let buckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private struct RouteStats {
        var byStatus: [Int: Int] = [:]
        var buckets = [Int](repeating: 0, count: Metrics.buckets.count)
        var count = 0
        var sum = 0.0
    }

    /// Per-route statistics in stripes picked by the calling thread, merged when rendered: every request ends here,
    /// and one lock for all of them was contended by 32 workers (4 % of a lookup's CPU in its slow path).
    private final class Stripe: Sendable {
        let routes = Mutex([RouteStats](repeating: RouteStats(), count: Route.allCases.count))
    }

    private static let stripeCount = 8
    private let stripes = (0..<Metrics.stripeCount).map { _ in Stripe() }

    /// The calling thread's stripe (its `pthread_t`, hashed).
    private var stripe: Stripe {
        let id = UInt64(pthread_self())  // pthread_t is the thread's address on Linux
        return stripes[Int(((id &* 0x9E37_79B9_7F4A_7C15) >> 32) % UInt64(Self.stripeCount))]
    }
    private let inFlight = Atomic<Int>(0)
    private let throttledCount = Atomic<Int>(0)
    private let quotaCount = Atomic<Int>(0)
    private let idleWakeups = Atomic<Int>(0)
    private let started = ContinuousClock.now

    func begin() { inFlight.add(1, ordering: .relaxed) }

    /// A request answered `THROTTLED` (rate limit).
    func throttled() { throttledCount.add(1, ordering: .relaxed) }

    /// A write refused with `QUOTA_EXCEEDED` (a user's storage quota).
    func quotaExceeded() { quotaCount.add(1, ordering: .relaxed) }

    /// A websocket pusher woke and had nothing to send (it waits for a notification or its connection's close, so
    /// this stays near 0; a periodic re-wait would show here).
    func idleWakeup() { idleWakeups.add(1, ordering: .relaxed) }

    /// Pusher wake-ups with nothing to send, so far.
    var idleWakeupCount: Int { idleWakeups.load(ordering: .relaxed) }

    func end(_ route: Route, status: Int, seconds: Double) {
        inFlight.subtract(1, ordering: .relaxed)
        let index = Route.allCases.firstIndex(of: route)!
        let bucket = Self.buckets.firstIndex { seconds <= $0 }
        stripe.routes.withLock { all in
            all[index].byStatus[status, default: 0] += 1
            if let bucket { all[index].buckets[bucket] += 1 }
            all[index].count += 1
            all[index].sum += seconds
        }
    }

    /// The Prometheus text exposition (format 0.0.4).
    func render(store: StoreStatistics) -> String {
        var snapshot = [RouteStats](repeating: RouteStats(), count: Route.allCases.count)
        for stripe in stripes {
            let part = stripe.routes.withLock { $0 }
            for (i, p) in part.enumerated() {
                snapshot[i].byStatus.merge(p.byStatus, uniquingKeysWith: +)
                for b in p.buckets.indices { snapshot[i].buckets[b] += p.buckets[b] }
                snapshot[i].count += p.count
                snapshot[i].sum += p.sum
            }
        }
        var out = ""
        out += "# HELP cloudlet_http_requests_total HTTP requests answered, by route and status.\n"
        out += "# TYPE cloudlet_http_requests_total counter\n"
        for (route, stats) in zip(Route.allCases, snapshot) {
            for status in stats.byStatus.keys.sorted() {
                out += "cloudlet_http_requests_total{route=\"\(route.rawValue)\",status=\"\(status)\"} \(stats.byStatus[status]!)\n"
            }
        }
        out += "# HELP cloudlet_http_request_duration_seconds Time from the request read to the response ready.\n"
        out += "# TYPE cloudlet_http_request_duration_seconds histogram\n"
        for (route, stats) in zip(Route.allCases, snapshot) where stats.count > 0 {
            let label = "route=\"\(route.rawValue)\""
            var cumulative = 0
            for (bound, n) in zip(Self.buckets, stats.buckets) {
                cumulative += n
                out += "cloudlet_http_request_duration_seconds_bucket{\(label),le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "cloudlet_http_request_duration_seconds_bucket{\(label),le=\"+Inf\"} \(stats.count)\n"
            out += "cloudlet_http_request_duration_seconds_sum{\(label)} \(stats.sum)\n"
            out += "cloudlet_http_request_duration_seconds_count{\(label)} \(stats.count)\n"
        }
        func metric(_ name: String, _ type: String, _ help: String, _ value: some CustomStringConvertible) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        // The in-flight gauge counts this request too.
        metric("cloudlet_http_requests_in_flight", "gauge", "Requests being handled.", inFlight.load(ordering: .relaxed))
        metric(
            "cloudlet_http_throttled_total", "counter", "Requests answered THROTTLED by the per-caller rate limit.",
            throttledCount.load(ordering: .relaxed))
        metric(
            "cloudlet_quota_exceeded_total", "counter", "Requests refused with QUOTA_EXCEEDED by a user's storage quota.",
            quotaCount.load(ordering: .relaxed))
        metric("cloudlet_store_commits_total", "counter", "Commits (log frames) written since the store was opened.", store.commits)
        metric("cloudlet_store_fsyncs_total", "counter", "fdatasync calls on log segments since the store was opened.", store.fsyncs)
        metric("cloudlet_store_log_bytes_written_total", "counter", "Bytes written to log segments since the store was opened.", store.bytesWritten)
        metric("cloudlet_store_records", "gauge", "Live records in the store (every container and database).", store.records)
        metric("cloudlet_store_zones", "gauge", "Zones in the store.", store.zones)
        metric("cloudlet_store_cache_hits_total", "counter", "Record cache hits.", store.cacheHits)
        metric("cloudlet_store_cache_misses_total", "counter", "Record cache misses (a read from the log).", store.cacheMisses)
        metric("cloudlet_store_entry_cache_hits_total", "counter", "Point reads whose key-directory entry was cached.", store.entryCacheHits)
        metric("cloudlet_store_entry_cache_misses_total", "counter", "Point reads that searched the key directory.", store.entryCacheMisses)
        metric("cloudlet_store_frames_replayed", "gauge", "Log frames replayed when the store was opened.", store.framesReplayed)
        metric("cloudlet_store_log_bytes", "gauge", "Bytes of log segment files.", store.logBytes)
        metric("cloudlet_store_log_bytes_read_total", "counter", "Bytes read from log segments since the store was opened.", store.logBytesRead)
        metric("cloudlet_store_dead_bytes", "gauge", "Bytes of sealed segments holding nothing current.", store.deadBytes)
        metric("cloudlet_compactions_total", "counter", "Compactions that took effect since the store was opened.", store.compactions)
        metric("cloudlet_compaction_bytes_reclaimed_total", "counter", "Bytes compactions gave back.", store.compactionBytesReclaimed)
        metric("cloudlet_compactions_running", "gauge", "Partitions compacting now.", store.compactionsRunning)
        metric("cloudlet_compaction_progress_bytes", "gauge", "Input bytes the running compactions have copied.", store.compactionBytesDone)
        metric("cloudlet_compaction_total_bytes", "gauge", "Input bytes of the running compactions.", store.compactionBytesTotal)
        metric("cloudlet_compaction_max_pause_microseconds", "gauge", "Longest writer pause at a compaction swap.", store.compactionMaxPauseMicroseconds)
        metric(
            "cloudlet_store_write_stalls_total", "counter",
            "Times a partition held its writes: its memtable was full while the previous one was still being flushed.",
            store.writeStalls)
        metric(
            "cloudlet_store_write_stall_seconds_total", "counter", "Time writes spent held by write stalls.",
            Double(store.writeStallMicroseconds) / 1e6)
        metric("cloudlet_store_write_stalled", "gauge", "Partitions whose writes are stalled now.", store.partitionsStalled)
        metric("cloudlet_store_memtable_bytes", "gauge", "Bytes in the key directories' active memtables.", store.memtableBytes)
        out += "# HELP cloudlet_background_errors_total Background work that failed since the store was opened, by job.\n"
        out += "# TYPE cloudlet_background_errors_total counter\n"
        for job in BackgroundJob.allCases {
            let n = store.backgroundErrors.filter { $0.job == job }.reduce(0) { $0 + $1.count }
            out += "cloudlet_background_errors_total{job=\"\(job.name)\"} \(n)\n"
        }
        metric(
            "cloudlet_store_read_only", "gauge", "1 while a partition or the catalog is read-only after a failed write.",
            store.readOnlyReasons.isEmpty ? 0 : 1)
        metric(
            "cloudlet_store_recovery_findings", "gauge", "Damage the last open of the store found and worked around.",
            store.recoveryFindings.count)
        metric(
            "cloudlet_notification_waiters", "gauge", "Long polls and websocket pushers waiting for a notification.",
            store.notificationWaiters)
        metric(
            "cloudlet_websocket_idle_wakeups_total", "counter", "Websocket pushers that woke with nothing to send.",
            idleWakeups.load(ordering: .relaxed))
        let uptime = ContinuousClock.now - started
        metric("cloudlet_uptime_seconds", "gauge", "Seconds since the server was created.", Double(uptime.components.seconds))
        return out
    }

    /// Seconds since the metrics (and the server) were created.
    var uptimeSeconds: Int64 { (ContinuousClock.now - started).components.seconds }
}
