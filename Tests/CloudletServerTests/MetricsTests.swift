import Cloudlet
import Foundation
import Testing

@testable import CloudletServer

@Suite("Metrics exposition")
struct MetricsTests {
    @Test("background errors are counted per job, every job listed; a read-only store and recovery findings show")
    func backgroundErrorsAndReadOnly() {
        var stats = StoreStatistics()
        let now = Date()
        stats.backgroundErrors = [
            BackgroundError(job: .checkpoint, source: "catalog", count: 1, time: now, message: "io: …"),
            BackgroundError(job: .checkpoint, source: "partition 0", count: 2, time: now, message: "io: …"),
            BackgroundError(job: .flush, source: "partition 1", count: 1, time: now, message: "readOnly: …"),
        ]
        stats.readOnlyReasons = ["readOnly: partition 1 is read-only after a failed fdatasync on …"]
        stats.recoveryFindings = ["partition 0: set aside damaged checkpoint …"]
        let lines = Metrics().render(store: stats).split(separator: "\n").map(String.init)
        #expect(lines.contains("# TYPE cloudlet_background_errors_total counter"))
        #expect(lines.contains(#"cloudlet_background_errors_total{job="checkpoint"} 3"#))
        #expect(lines.contains(#"cloudlet_background_errors_total{job="flush"} 1"#))
        for job in ["purge", "compaction", "notification"] {
            #expect(lines.contains(#"cloudlet_background_errors_total{job="\#(job)"} 0"#))
        }
        #expect(lines.contains("cloudlet_store_read_only 1"))
        #expect(lines.contains("cloudlet_store_recovery_findings 1"))
    }

    @Test("requests ended on many threads are all counted, by route, status and bucket (the per-thread stripes merge)")
    func requestsFromManyThreadsAreAllCounted() {
        let metrics = Metrics()
        let threads = 16, perThread = 500
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            for i in 0..<perThread {
                metrics.begin()
                metrics.end(.recordsLookup, status: i % 5 == 0 ? 404 : 200, seconds: t % 2 == 0 ? 0.0004 : 0.02)
            }
        }
        metrics.begin()
        metrics.end(.health, status: 200, seconds: 0.001)
        let lines = Set(Metrics.renderLines(metrics))
        let total = threads * perThread
        #expect(lines.contains(#"cloudlet_http_requests_total{route="records/lookup",status="200"} \#(total * 4 / 5)"#))
        #expect(lines.contains(#"cloudlet_http_requests_total{route="records/lookup",status="404"} \#(total / 5)"#))
        #expect(lines.contains(#"cloudlet_http_requests_total{route="cloudlet/health",status="200"} 1"#))
        #expect(lines.contains(#"cloudlet_http_request_duration_seconds_bucket{route="records/lookup",le="0.0005"} \#(total / 2)"#))
        #expect(lines.contains(#"cloudlet_http_request_duration_seconds_bucket{route="records/lookup",le="0.025"} \#(total)"#))
        #expect(lines.contains(#"cloudlet_http_request_duration_seconds_count{route="records/lookup"} \#(total)"#))
        #expect(lines.contains("cloudlet_http_requests_in_flight 0"))
    }
}

extension Metrics {
    /// The exposition's lines, with an empty store's statistics.
    static func renderLines(_ metrics: Metrics) -> [String] {
        metrics.render(store: StoreStatistics()).split(separator: "\n").map(String.init)
    }
}
