/// The asset rows next to the disk rows that bound them, measured in the same invocation: the goal for assets
/// is a share of what the disk itself does (docs/assets.md, *Speed*; Benchmarks/README.md says which anchor is which).
extension TablePrinter {
    /// Asset workload → the disk workloads it is compared with, the fair one first.
    static let diskAnchors: [(workload: String, anchors: [String])] = [
        ("asset-upload-1m", ["disk-filesync-1m", "disk-seqwrite"]),
        ("asset-upload-16m", ["disk-seqwrite"]),
        ("asset-upload-100m", ["disk-seqwrite"]),
        // A download run starts with its files out of the page cache: one cold 1 MB file is what the disk does for
        // it (disk-fileread-1m); disk-seqread streams one large file with readahead, which no 1 MB file gets.
        ("asset-download-1m", ["disk-fileread-1m", "disk-seqread"]),
        ("asset-download-16m", ["disk-seqread"]),
        ("asset-download-100m", ["disk-seqread"]),
    ]

    /// `asset-upload-1m  245 MB/s  0.45 of disk-filesync-1m (548 MB/s), 0.13 of disk-seqwrite (1,914 MB/s)`, for the
    /// asset rows whose anchors ran; nothing when none did.
    func diskAnchorLines(_ results: [BenchResult]) -> [String] {
        func median(_ workload: String) -> Double? {
            results.first { $0.workload == workload && $0.unit == "MB/s" }?.shown.value
        }
        var rows: [[String]] = []
        for (workload, anchors) in Self.diskAnchors {
            guard let value = median(workload) else { continue }
            let shares = anchors.compactMap { a in
                median(a).map { String(format: "%.2f", value / $0) + " of \(a) (\(Self.number($0)) MB/s)" }
            }
            guard !shares.isEmpty else { continue }
            rows.append([workload, Self.number(value) + " MB/s", shares.joined(separator: ", ")])
        }
        guard !rows.isEmpty else { return [] }
        return ["", "assets against the disk, same run (issue 15's goal: >= 0.50 of the first anchor):"]
            + Self.align([["workload", "median", "share of the disk's median"]] + rows, rightAligned: [1], rule: true)
    }
}
