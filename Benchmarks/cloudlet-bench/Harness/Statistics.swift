/// Order statistics over samples (throughputs of runs, latencies of operations).
enum Statistics {
    /// The median; the mean of the two middle values for an even count. `nil` for no samples.
    static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let s = values.sorted()
        let mid = s.count / 2
        return s.count % 2 == 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2
    }

    /// The nearest-rank percentile (`p` in 0...100): the smallest sample that at least p% of samples do not
    /// exceed. `nil` for no samples.
    static func percentile(_ sorted: [Double], _ p: Double) -> Double? {
        guard !sorted.isEmpty else { return nil }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }
}
