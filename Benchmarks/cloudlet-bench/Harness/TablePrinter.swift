import Foundation

/// Renders results as an aligned text table with notes underneath, then the ratios again as one row per workload
/// and one column per anchor.
struct TablePrinter {
    static let headers = ["workload", "engine", "median", "unit", "spread", "p50", "p99", "of sync limit", "cloudlet/anchor"]
    /// Right-aligned columns (numbers).
    static let rightAligned: Set<Int> = [2, 4, 5, 6, 7, 8]

    func render(_ results: [BenchResult]) -> String {
        let rows = results.map { r in
            [
                r.workload, r.engine, Self.number(r.shown.value), r.shown.unit, r.spread.map { Self.percent($0) } ?? "-",
                Self.latency(r.p50), Self.latency(r.p99), r.ofSyncLimit.map { Self.percent($0) } ?? "",
                Self.ratio(r),
            ]
        }
        var out = Self.align([Self.headers] + rows, rightAligned: Self.rightAligned, rule: true)
        out.append("")
        out.append("median: over the measured runs; spread: (max - min) / median of the runs' throughputs.")
        out.append("p50/p99: latency of one operation, all measured runs pooled; an operation is:")
        var seen = Set<String>()
        for r in results where seen.insert(r.workload).inserted {
            out.append("  \(r.workload): \(r.latencyOf)")
        }
        out.append(
            "of sync limit: records/s / the faster disk row's (one 4 KiB write + fdatasync per record, run "
                + "interleaved with the engines); over 100%: several commits per sync.")
        out.append(
            "cloudlet/anchor: Cloudlet's median throughput / this row's (> 1: Cloudlet faster; for s/1M records, "
                + "the anchor's time / Cloudlet's); n/a: no Cloudlet run.")
        let notes = results.compactMap { r in r.note.map { "  \(r.workload) on \(r.engine): \($0)" } }
        if !notes.isEmpty {
            out.append("notes (last run):")
            out += notes
        }
        out += diskAnchorLines(results)
        out.append("")
        out += ratioMatrix(results)
        out += scaleTables(results)
        return out.joined(separator: "\n")
    }

    /// One row per workload Cloudlet ran, one column per anchor engine: the ratio, `-` where the anchor did not run.
    func ratioMatrix(_ results: [BenchResult]) -> [String] {
        var anchors: [String] = []
        var workloads: [String] = []
        for r in results where r.ratio != nil {
            if !anchors.contains(r.engine) { anchors.append(r.engine) }
            if !workloads.contains(r.workload) { workloads.append(r.workload) }
        }
        guard !anchors.isEmpty else { return [] }
        let rows = workloads.map { w in
            [w] + anchors.map { a in
                results.first { $0.workload == w && $0.engine == a }.map(Self.ratio) ?? "-"
            }
        }
        return ["cloudlet/anchor by workload (> 1: Cloudlet faster):"]
            + Self.align([["workload"] + anchors] + rows, rightAligned: Set(1...anchors.count), rule: true)
    }

    /// Pads every column to its widest cell; the first row is the header, underlined when `rule`.
    static func align(_ table: [[String]], rightAligned: Set<Int>, rule: Bool) -> [String] {
        guard let header = table.first else { return [] }
        let widths = header.indices.map { c in table.map { $0[c].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { c, cell in
                let pad = String(repeating: " ", count: widths[c] - cell.count)
                return rightAligned.contains(c) ? pad + cell : cell + pad
            }.joined(separator: "  ").replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
        var out = [line(header)]
        if rule { out.append(line(widths.map { String(repeating: "-", count: $0) })) }
        out += table.dropFirst().map(line)
        return out
    }

    static func ratio(_ r: BenchResult) -> String {
        if r.role == .subject { return "-" }
        guard let ratio = r.ratio else { return "n/a" }
        return times(ratio)
    }

    /// `0.52x`, `12.34x`, `0.052x`, `140x`; two significant digits below 0.01 (`0.00022x`).
    static func times(_ ratio: Double) -> String {
        switch ratio {
        case 100...: String(format: "%.0fx", ratio)
        case 0.1...: String(format: "%.2fx", ratio)
        case 0.01...: String(format: "%.3fx", ratio)
        default: String(format: "%.2gx", ratio)
        }
    }

    /// 12,345 for large values, 45.6 below 100, 0.123 below 1.
    static func number(_ v: Double) -> String {
        if v < 1 { return String(format: "%.3f", v) }
        if v < 100 { return String(format: "%.1f", v) }
        let digits = String(Int(v.rounded()))
        var out = ""
        for (k, ch) in digits.enumerated() {
            if k > 0 && (digits.count - k) % 3 == 0 { out.append(",") }
            out.append(ch)
        }
        return out
    }

    static func percent(_ v: Double) -> String { String(format: "%.0f%%", v * 100) }

    static func latency(_ seconds: Double?) -> String {
        guard let s = seconds else { return "-" }
        switch s {
        case ..<1e-3: return String(format: "%.1f µs", s * 1e6)
        case ..<1: return String(format: "%.2f ms", s * 1e3)
        default: return String(format: "%.2f s", s)
        }
    }
}
