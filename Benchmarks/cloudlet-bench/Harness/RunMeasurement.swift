/// What one run of a workload measured.
struct RunMeasurement: Sendable {
    /// Operations completed (records saved, syncs done, megabytes written…, in the workload's unit).
    var operations: Double
    /// Wall-clock seconds for all of them.
    var seconds: Double
    /// The latency of each timed operation, in seconds (what an "operation" is: ``Workload/latencyOf``).
    var latencies: [Double]
    /// Something the run observed that the reader should know (`1,001 log frames replayed`); shown under the table.
    var note: String? = nil
    /// What `scale` measured besides reads/s and read latency.
    var scale: ScaleFigures? = nil

    /// Operations per second.
    var throughput: Double { seconds > 0 ? operations / seconds : 0 }
}
