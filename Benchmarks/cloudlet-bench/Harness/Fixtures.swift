import Foundation

/// Data sets and preloaded stores shared by the workloads of one process run.
///
/// A preloaded store (for `readrandom`, `readhot`, `overwrite`, `recover-*`) is built once per engine and size:
/// the engine saves the records in batches of 200 with `os` durability, copies a crash image of itself while open
/// (``BenchEngine/crashImage(to:)``), then closes cleanly. Each run copies one of the two into its own directory
/// (outside the timed region), so runs never see each other's changes. Everything lives under
/// `<bench dir>/fixtures` and is deleted by ``removeAll()``.
final class Fixtures {
    struct Store {
        /// The records the store holds (random names, with updates).
        let data: BenchData
        /// The engine's files after a clean `close` (Cloudlet: with a checkpoint).
        let clean: String
        /// The engine's files as a crash right after the load would leave them (see `crashImage`).
        let crash: String
    }

    private struct DataKey: Hashable {
        var count: Int
        var names: RecordGenerator.NameOrder
        var withUpdates: Bool
    }

    private struct StoreKey: Hashable {
        var engine: String
        var count: Int
    }

    let root: String
    private var dataSets: [DataKey: BenchData] = [:]
    private var stores: [StoreKey: Store] = [:]
    static let loadBatch = 200

    init(root: String) {
        self.root = root
    }

    /// Records `0..<count`, generated once per process run.
    func data(count: Int, names: RecordGenerator.NameOrder, withUpdates: Bool = false) -> BenchData {
        // A set with updates serves requests without them too.
        if !withUpdates, let d = dataSets[DataKey(count: count, names: names, withUpdates: true)] { return d }
        let key = DataKey(count: count, names: names, withUpdates: withUpdates)
        if let d = dataSets[key] { return d }
        let d = BenchData(count: count, names: names, withUpdates: withUpdates)
        dataSets[key] = d
        return d
    }

    /// `entry`'s engine loaded with `count` records (random names), built on first use.
    func store(_ entry: EngineRegistry.Entry, count: Int) throws -> Store {
        let key = StoreKey(engine: entry.name, count: count)
        if let s = stores[key] { return s }
        let data = data(count: count, names: .random, withUpdates: true)
        let dir = root + "/\(entry.name)-\(count)"
        let store = Store(data: data, clean: dir + "/clean", crash: dir + "/crash")
        try? FileManager.default.removeItem(atPath: dir)
        for d in [store.clean, store.crash] {
            do {
                try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
            } catch {
                throw BenchError(.io, "cannot create fixture directory '\(d)': \(error.localizedDescription)")
            }
        }
        let engine = entry.make()
        try engine.open(dir: store.clean, data: data, settings: EngineSettings(durability: .os))
        do {
            for start in stride(from: 0, to: count, by: Self.loadBatch) {
                try engine.saveBatch(start..<min(start + Self.loadBatch, count))
            }
            try engine.crashImage(to: store.crash)
        } catch {
            try? engine.close()
            throw error
        }
        try engine.close()
        stores[key] = store
        return store
    }

    /// Copies everything in `source` into the existing directory `dir`.
    static func copyContents(of source: String, into dir: String) throws {
        let fm = FileManager.default
        do {
            for name in try fm.contentsOfDirectory(atPath: source) {
                try fm.copyItem(atPath: source + "/" + name, toPath: dir + "/" + name)
            }
        } catch {
            throw BenchError(.io, "cannot copy '\(source)' to '\(dir)': \(error.localizedDescription)")
        }
    }

    /// Deletes every preloaded store (the data sets stay in memory).
    func removeAll() {
        try? FileManager.default.removeItem(atPath: root)
        stores = [:]
    }
}
