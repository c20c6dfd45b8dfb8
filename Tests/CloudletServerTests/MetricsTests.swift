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
}
