import CloudletReplication

/// The progress line of a replica catching up (issue 14: "a node started empty catches up from zero … with a
/// progress line"): while this node's durable end trails the leader's published end by more than
/// ``threshold`` LSNs it says how far it is, at most every ``interval``; once within it, how long it took.
/// No I/O: the driver feeds it its durable LSN, the leader's published end and the time, and logs what it returns.
struct CatchUpProgress {
    /// Behind by more than this many LSNs (commits, of one record or of hundreds) is catching up. Default 1,000.
    var threshold: UInt64 = 1_000
    /// Milliseconds between two lines while catching up. Default 5 s.
    var interval: Millis = 5_000

    /// When catching up started, and the durable LSN then; when the last line was said, and the durable LSN then.
    private var started: (at: Millis, lsn: UInt64)?
    private var said: (at: Millis, lsn: UInt64) = (0, 0)

    /// What to say now, if anything, for a partition named `log` whose durable end here is `durable`, the leader's
    /// `leaderEnd`, at `now`.
    mutating func note(log: String, durable: UInt64, leaderEnd: UInt64, leader: String, now: Millis) -> String? {
        let behind = leaderEnd > durable ? leaderEnd - durable : 0
        guard let start = started else {
            guard behind > threshold else { return nil }
            started = (now, durable)
            said = (now, durable)
            return "\(log): catching up from \(leader): LSN \(durable) of \(leaderEnd), \(behind) behind"
        }
        if behind <= threshold {
            started = nil
            let seconds = Double(max(now > start.at ? now - start.at : 0, 1)) / 1000
            let rate = Double(durable - min(start.lsn, durable)) / seconds
            return "\(log): caught up with \(leader) at LSN \(durable) in \(Self.format(seconds)) s (\(Int(rate)) LSNs/s)"
        }
        let since = now > said.at ? now - said.at : 0
        guard since >= interval else { return nil }
        let rate = Double(durable - min(said.lsn, durable)) / (Double(since) / 1000)
        said = (now, durable)
        let percent = leaderEnd > 0 ? Int(Double(durable) * 100 / Double(leaderEnd)) : 0
        return "\(log): catching up from \(leader): LSN \(durable) of \(leaderEnd) (\(percent) %), \(Int(rate)) LSNs/s"
    }

    private static func format(_ seconds: Double) -> String {
        let tenths = Int((seconds * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}
