import Foundation

extension TablePrinter {
    /// The `scale` figures under the main table (whose `scale` rows hold reads/s and read latency): one table per
    /// record, one of the raw memory and disk figures, and Cloudlet's figures against each anchor's. Empty when
    /// `scale` did not run.
    func scaleTables(_ results: [BenchResult]) -> [String] {
        let runs = results.compactMap { r in r.scale.map { (result: r, figures: $0) } }
        guard let first = runs.first?.figures else { return [] }
        let n = { (v: Int) in Self.number(Double(v)) }
        var out = [
            "",
            "scale: \(n(first.records)) records loaded in batches of \(first.batchSize) (durability os, closed), "
                + "reopened by a fresh process, \(n(first.reads)) uniform reads; one run, each phase in a child "
                + "process of its own.",
        ]
        out += Self.align(
            [["engine", "load", "disk B/rec", "open", "RSS open B/rec", "HWM B/rec", "RSS end B/rec", "anon end B/rec", "reads/s", "p50", "p99", "cache"]]
                + runs.map { r, f in
                    [
                        r.engine, Self.number(f.loadRate) + "/s", Self.number(f.perRecord(f.diskBytes)),
                        Self.latency(f.openSeconds), Self.number(f.perRecord(f.read.opened.residentBytes)),
                        Self.number(f.perRecord(f.read.afterReads.peakBytes)),
                        Self.number(f.perRecord(f.read.afterReads.residentBytes)),
                        Self.number(f.perRecord(f.read.afterReads.anonymousBytes)), Self.number(f.readRate),
                        Self.latency(r.p50), Self.latency(r.p99), f.cache,
                    ]
                }, rightAligned: Set(1...10), rule: true)
        out.append("")
        let mib = { (bytes: Int) in String(format: "%.1f", Double(bytes) / 1_048_576) }
        out += Self.align(
            [["MiB", "load: base", "loaded RSS", "HWM", "close", "read: base", "opened RSS", "end RSS", "end anon", "end file", "HWM", "disk", "files"]]
                + runs.map { r, f in
                    [
                        r.engine, mib(f.load.baseline.residentBytes), mib(f.load.loaded.residentBytes),
                        mib(f.load.closed.peakBytes), Self.latency(f.load.closeSeconds),
                        mib(f.read.baseline.residentBytes), mib(f.read.opened.residentBytes),
                        mib(f.read.afterReads.residentBytes), mib(f.read.afterReads.anonymousBytes),
                        mib(f.read.afterReads.fileBytes), mib(f.read.afterReads.peakBytes), mib(f.diskBytes),
                        String(f.files),
                    ]
                }, rightAligned: Set(1...12), rule: true)
        out += [
            "load: records/s, close (what makes the load durable) included; disk: the files' sizes after the load / "
                + "records; open: open + one read in the reopened store; RSS open / HWM / RSS end: the read process's "
                + "VmRSS after the open, its VmHWM and VmRSS after the reads, / records, nothing subtracted (the "
                + "base column is the process before the engine was opened); anon / file end: that VmRSS split into "
                + "RssAnon (the process's own memory: what the memory goal is held to) and RssFile (pages of mapped "
                + "files: binaries, and Cloudlet's mapped log segments — the OS page cache, reclaimable); cache: as "
                + "configured.",
        ]
        guard let subject = runs.first(where: { $0.result.role == .subject })?.figures else { return out }
        let anchors = runs.filter { $0.result.role == .anchor }
        guard !anchors.isEmpty else { return out }
        out.append("")
        out.append("scale, cloudlet/anchor (> 1: Cloudlet better: faster, or smaller):")
        out += Self.align(
            [["anchor", "load", "disk", "open", "RSS open", "HWM", "RSS end", "anon end", "reads/s"]]
                + anchors.map { r, f in
                    [
                        r.engine, Self.times(subject.loadRate / f.loadRate),
                        Self.times(Double(f.diskBytes) / Double(subject.diskBytes)),
                        Self.times(f.openSeconds / subject.openSeconds),
                        Self.times(Double(f.read.opened.residentBytes) / Double(subject.read.opened.residentBytes)),
                        Self.times(Double(f.read.afterReads.peakBytes) / Double(subject.read.afterReads.peakBytes)),
                        Self.times(
                            Double(f.read.afterReads.residentBytes) / Double(subject.read.afterReads.residentBytes)),
                        Self.times(
                            Double(f.read.afterReads.anonymousBytes) / Double(subject.read.afterReads.anonymousBytes)),
                        Self.times(subject.readRate / f.readRate),
                    ]
                }, rightAligned: Set(1...8), rule: true)
        return out
    }
}
