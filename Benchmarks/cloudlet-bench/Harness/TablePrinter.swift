import Foundation

/// Renders results as an aligned text table with notes underneath.
struct TablePrinter {
    static let headers = ["workload", "engine", "median", "unit", "spread", "p50", "p99", "cloudlet/anchor"]
    /// Right-aligned columns (numbers).
    static let rightAligned: Set<Int> = [2, 4, 5, 6, 7]

    func render(_ results: [BenchResult]) -> String {
        let rows = results.map { r in
            [
                r.workload, r.engine, Self.number(r.median), r.unit, r.spread.map { Self.percent($0) } ?? "-",
                Self.latency(r.p50), Self.latency(r.p99), Self.ratio(r),
            ]
        }
        let all = [Self.headers] + rows
        let widths = Self.headers.indices.map { c in all.map { $0[c].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { c, cell in
                let pad = String(repeating: " ", count: widths[c] - cell.count)
                return Self.rightAligned.contains(c) ? pad + cell : cell + pad
            }.joined(separator: "  ").replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
        var out = [line(Self.headers), line(widths.map { String(repeating: "-", count: $0) })]
        out += rows.map(line)
        out.append("")
        out.append("median: throughput over the measured runs; spread: (max - min) / median of those runs.")
        out.append("p50/p99: latency of one operation, all measured runs pooled; an operation is:")
        var seen = Set<String>()
        for r in results where seen.insert(r.workload).inserted {
            out.append("  \(r.workload): \(r.latencyOf)")
        }
        out.append(
            "cloudlet/anchor: Cloudlet's median throughput / this row's (> 1: Cloudlet faster); n/a: no Cloudlet run.")
        return out.joined(separator: "\n")
    }

    static func ratio(_ r: BenchResult) -> String {
        if r.role == .subject { return "-" }
        guard let ratio = r.ratio else { return "n/a" }
        return String(format: "%.2fx", ratio)
    }

    /// 12,345 for large values, 45.6 below 100.
    static func number(_ v: Double) -> String {
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
        case ..<1e-3: return String(format: "%.0f µs", s * 1e6)
        case ..<1: return String(format: "%.2f ms", s * 1e3)
        default: return String(format: "%.2f s", s)
        }
    }
}
