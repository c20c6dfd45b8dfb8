import CloudletCore

/// Merging, leveled (as LevelDB): level 0 holds flushed runs, which may overlap; every deeper level holds runs
/// with disjoint key ranges and a byte budget ten times the previous one's. When level 0 has
/// ``LSMTreeConfiguration/level0MergeTrigger`` runs, all of them merge with the level-1 runs they overlap into
/// new level-1 runs; when a level ≥ 1 is over its budget, one of its runs merges with the runs it overlaps one
/// level down. Of the levels due, the one furthest over (run count over the trigger at level 0, bytes over the
/// budget below) goes first. Leveled rather than tiered because the tree serves point reads (the key directory) far more than it
/// takes writes: a key is in at most one run a level ≥ 1, and space overhead stays near 10%; the extra rewriting
/// is small at index sizes.
///
/// Tombstones are dropped by a merge when no run below the output level overlaps the merged key range: nothing
/// older can be left for them to hide.
extension LSMTree {
    struct MergePlan {
        var inputs: [LSMRunHandle]
        var outputLevel: Int
        var dropTombstones: Bool
    }

    /// Merges until none is due, in the calling thread (also what the background thread does). Throws the first
    /// error, which also stops the tree's writes.
    public func mergeUntilIdle() throws {
        do { while try mergeOnce() { mergeInstalled() } } catch is MergeAbandoned { throw closedError() }
    }

    /// What a merge stopped by ``close()`` throws to a caller.
    private func closedError() -> CloudletError {
        CloudletError(.readOnly, "LSM tree \(directory) closed while a merge ran; the merge was abandoned")
    }

    /// Merges every run into the deepest level in use (at least 1), dropping tombstones and overwritten versions:
    /// the smallest the tree can be. For offline compaction (`cloudlet-tool compact`); not rate-limited.
    public func mergeAll() throws {
        let merged = try mergeLock.withLock { _ -> Bool in
            try checkWritable()
            let plan = state.withLock { s -> MergePlan? in
                guard s.runs.count > 1 || s.runs.first?.metadata.level == 0 else { return nil }
                let bottom = max(1, s.runs.map(\.metadata.level).max() ?? 1)
                return MergePlan(inputs: s.runs, outputLevel: bottom, dropTombstones: true)
            }
            guard let plan else { return false }
            do { try merge(plan, bytesPerSecond: nil) } catch is MergeAbandoned { throw closedError() }
            return true
        }
        if merged { mergeInstalled() }
    }

    /// Runs one due merge; false if none is due.
    func mergeOnce() throws -> Bool {
        try mergeLock.withLock { _ in
            try checkWritable()
            guard let plan = state.withLock({ s in Self.plan(s.runs, configuration) }) else { return false }
            // A merge out of level 0 is what lets flushes go on (they wait at the stop trigger): it runs at full
            // speed, so that the limit never throttles writes; merges between deeper levels are rate-limited while
            // level 0 keeps up (see the limiter in merge(_:bytesPerSecond:)).
            let fromLevel0 = plan.inputs.contains { $0.metadata.level == 0 }
            try merge(plan, bytesPerSecond: fromLevel0 ? nil : configuration.mergeBytesPerSecond)
            return true
        }
    }

    /// Writes the merge of `plan`'s inputs and installs it in their place; on failure the tree stops.
    private func merge(_ plan: MergePlan, bytesPerSecond: Int?) throws {
        var outputs: [LSMRunHandle] = []
        var edited = false
        do {
            // Merge reads go around the cache: a merge reads whole runs once and would push out what reads need.
            let iterator = MergingIterator(
                try plan.inputs.map { try $0.reader().makeIterator(fillCache: false) }, dropTombstones: plan.dropTombstones)
            try iterator.seekToFirst()
            // Level 0 reaching its merge trigger while this merge runs means flushes are coming faster than merges
            // go: the limit gives way, so that it never throttles writes (a flush waits at the stop trigger).
            let trigger = max(1, configuration.level0MergeTrigger)
            var limiter = RateLimiter(
                bytesPerSecond: bytesPerSecond,
                urgent: { [state] in state.withLock { s in s.version.runs(atLevel: 0).count >= trigger } },
                cancelled: { [self] in closing.load(ordering: .relaxed) })
            let from = plan.inputs.map(\.metadata.level).min() ?? 0
            outputs = try writeRuns(
                iterator, level: plan.outputLevel, creator: "merge L\(from)→L\(plan.outputLevel)",
                split: configuration.targetRunSize(level: plan.outputLevel), limiter: &limiter, abandonOnClose: true)
            CrashPoint.reached("lsm.merge.written")
            let edit = ManifestEdit(
                addedRuns: outputs.map(\.metadata), removedRuns: plan.inputs.map(\.metadata.fileNumber))
            edited = true
            try install(edit, adding: outputs, removing: plan.inputs) { s in
                s.merges += 1
                s.mergeBytesWritten += outputs.reduce(0) { $0 + $1.metadata.fileSize }
            }
        } catch is MergeAbandoned {
            discard(outputs, edited: false)
            throw MergeAbandoned()
        } catch {
            discard(outputs, edited: edited)
            throw fail(error)
        }
    }

    /// The merge due for these runs (in version order), if any.
    static func plan(_ runs: [LSMRunHandle], _ configuration: LSMTreeConfiguration) -> MergePlan? {
        func overlapping(_ level: Int, _ low: [UInt8], _ high: [UInt8]) -> [LSMRunHandle] {
            runs.filter { r in
                r.metadata.level == level && LSMKey.compare(r.metadata.largestKey, low) >= 0
                    && LSMKey.compare(r.metadata.smallestKey, high) <= 0
            }
        }
        func plan(_ upper: [LSMRunHandle], into level: Int) -> MergePlan {
            let low = upper.map(\.metadata.smallestKey).min(by: LSMKey.less)!
            let high = upper.map(\.metadata.largestKey).max(by: LSMKey.less)!
            let lower = overlapping(level, low, high)
            let deeper = runs.contains { r in
                r.metadata.level > level && LSMKey.compare(r.metadata.largestKey, low) >= 0
                    && LSMKey.compare(r.metadata.smallestKey, high) <= 0
            }
            return MergePlan(inputs: upper + lower, outputLevel: level, dropTombstones: !deeper)
        }
        // The level furthest over its budget goes first (LevelDB's compaction score): level 0's score is its run
        // count over the merge trigger, a deeper level's its bytes over its budget. Level 0 first whenever it was
        // due let level 1 grow without bound under a steady load (every level-0 merge also rewrites the level-1
        // runs it overlaps — with random keys, all of level 1 — so a 10 M-record load ended with ~1 GB at level 1,
        // 100 times its budget, and each merge rewrote it).
        var best: (score: Double, level: Int)?
        let level0 = runs.filter { $0.metadata.level == 0 }
        let trigger = max(1, configuration.level0MergeTrigger)
        if level0.count >= trigger { best = (Double(level0.count) / Double(trigger), 0) }
        let deepest = runs.map(\.metadata.level).max() ?? 0
        for level in stride(from: 1, through: deepest, by: 1) {
            let bytes = runs.reduce(UInt64(0)) { $0 + ($1.metadata.level == level ? $1.metadata.fileSize : 0) }
            let budget = configuration.maxBytes(level: level)
            guard bytes > budget else { continue }
            let score = Double(bytes) / Double(max(budget, 1))
            if score > best?.score ?? 0 { best = (score, level) }
        }
        guard let best else { return nil }
        if best.level == 0 { return plan(level0, into: 1) }
        // The largest run goes down: it frees the most of the budget.
        let here = runs.filter { $0.metadata.level == best.level }
        guard let run = here.max(by: { $0.metadata.fileSize < $1.metadata.fileSize }) else { return nil }
        return plan([run], into: best.level + 1)
    }

    /// The background thread: waits for a flush (or close), merges while merges are due (waking flushes stalled on
    /// level 0 after each), stops at the first error.
    func backgroundLoop() {
        while true {
            let go = state.withLock(waitingOn: .work, until: { $0.closed || $0.mergeWanted }) { s -> Bool in
                s.mergeWanted = false
                return !s.closed
            }
            guard go else { return }
            do {
                while !state.withLock({ $0.closed }), try mergeOnce() {
                    state.broadcast(.progress)
                    mergeInstalled()
                }
            } catch is MergeAbandoned {
                return  // closing
            } catch {
                state.broadcast(.progress)  // a stalled flush wakes up to the error
                return  // recorded by mergeOnce (fail); writes now stop with it
            }
        }
    }
}
