import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Synchronization
import Testing

@testable import Cloudlet

/// Opens a store in a temp dir with OS durability (fast) unless told otherwise.
func openStore(_ dir: TempDir, durability: Durability = .os, partitions: Int = 1) async throws -> CloudletStore {
    var config = StoreConfiguration(durability: durability)
    config.partitions = partitions
    return try await CloudletStore.open(at: dir.sub("store"), configuration: config)
}

let testContainer = "iCloud.com.example.tests"

func note(_ name: String, zone: ZoneID = .default, title: String = "t", count: Int64 = 0) -> Record {
    Record(recordType: "Note", recordName: name, zoneID: zone, fields: ["title": .string(title), "count": .int64(count)])
}

extension RecordResult {
    var code: CloudletError.Code? { error?.code }
}

/// Expects `body` to throw a CloudletError with `code`; returns it for further checks.
@discardableResult
func expectError<T>(
    _ code: CloudletError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T
) async -> CloudletError? {
    do {
        _ = try await body()
        Issue.record("expected \(code), got success", sourceLocation: sourceLocation)
        return nil
    } catch let e as CloudletError {
        #expect(e.code == code, "expected \(code), got \(e)", sourceLocation: sourceLocation)
        return e
    } catch {
        Issue.record("expected CloudletError \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Runs `cloudlet-crash-writer` (`exe`) with `arguments` until it printed `lines` lines past its `ready` (or 10 s went
/// by), kills it with SIGKILL and returns what it printed; expects that it was the kill that ended it.
func crashWriterOutput(_ exe: String, _ arguments: [String], lines: Int, round: Int) async throws -> [String] {
    let child = try ChildProcess(exe, arguments)
    let deadline = Date().addingTimeInterval(10)
    while child.stdout.count < lines + 1 && Date() < deadline { try await Task.sleep(for: .milliseconds(2)) }
    await child.stop(SIGKILL)
    #expect(child.process.terminationReason == .uncaughtSignal, "round \(round): writer died on its own; stderr: \(child.stderr)")
    return child.stdout
}

/// Rewrites partition 0's key directory of the closed store at `storePath`, as a bug or an older release would have
/// left it: `body` gets the flushed state (over the directory's runs) and fills a memtable, which is flushed over them.
func rewritePartitionDirectory(_ storePath: String, _ body: (PartitionState, inout Memtable) throws -> Void) throws {
    let indexDir = Partition.indexDirectory(storePath + "/" + StoreMetadata.partitionDirectoryName(0))
    var config = LSMTreeConfiguration()
    config.backgroundMerges = false
    let tree = try LSMTree(directory: indexDir, fileSystem: PosixFileSystem(), configuration: config)
    let base = tree.runsView()
    guard let bytes = try base.get(DirectoryKey.state) else {
        throw CloudletError.corruption("partition 0 of \(storePath) has no flushed state")
    }
    let state = try PartitionState.decodeState(bytes, base: base)
    var memtable = Memtable()
    try body(state, &memtable)
    try tree.flush(memtable, logPosition: tree.logPosition)
    tree.close()
}

/// Whether an action staged by ``onceBeforeCommit(_:_:)`` ran.
final class Ran: Sendable {
    let flag = Mutex(false)
    var value: Bool { flag.withLock { $0 } }
    /// true the first time only.
    func first() -> Bool { flag.withLock { done in defer { done = true }; return !done } }
}

/// Runs `action` once, the first time a `modify` of `store` reaches the point before its commit (after it grouped its
/// operations by zone): how a test stages another writer's change racing that `modify`. A failed action is an issue.
func onceBeforeCommit(_ store: CloudletStore, _ action: @escaping @Sendable () async throws -> Void) -> Ran {
    let ran = Ran()
    store.testHooks.setBeforeModifyCommit {
        guard ran.first() else { return }
        store.testHooks.setBeforeModifyCommit(nil)
        do { try await action() } catch { Issue.record("the action staged before the commit failed: \(error)") }
    }
    return ran
}
