import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@Suite("Checkpoint store")
struct CheckpointStoreTests {
    @Test("write then load the newest; only the newest two are kept")
    func writeAndLoad() async throws {
        try await withTempDirectory { dir in
            let store = CheckpointStore(directory: dir + "/ckpt")
            #expect(try store.loadLatest() == nil)
            let position = FramePosition(segment: 1, offset: 4096, length: 0)
            for lsn in [10, 20, 30, 40] as [UInt64] {
                try store.write(lsn: lsn, next: lsn == 40 ? position : nil, payload: Array("state at \(lsn)".utf8))
            }
            let latest = try #require(try store.loadLatest())
            #expect(latest.lsn == 40 && latest.next == position && latest.payload == Array("state at 40".utf8))
            let names = try FileManager.default.contentsOfDirectory(atPath: dir + "/ckpt").sorted()
            #expect(names == ["checkpoint-00000000000000000030.ckpt", "checkpoint-00000000000000000040.ckpt"])
            try store.write(lsn: 50, next: nil, payload: [])
            let empty = try #require(try store.loadLatest())
            #expect(empty.lsn == 50 && empty.next == nil && empty.payload.isEmpty)
        }
    }

    @Test("a damaged newest checkpoint falls back to the one before; both damaged: none")
    func damagedFallsBack() async throws {
        try await withTempDirectory { dir in
            let store = CheckpointStore(directory: dir)
            try store.write(lsn: 7, next: nil, payload: [UInt8](repeating: 1, count: 100))
            try store.write(lsn: 9, next: nil, payload: [UInt8](repeating: 2, count: 100))
            let newest = dir + "/checkpoint-00000000000000000009.ckpt"
            try flipByte(newest, at: 64 + 50)  // payload byte
            #expect(try store.loadLatest()?.lsn == 7)
            try flipByte(dir + "/checkpoint-00000000000000000007.ckpt", at: 17)  // header byte
            #expect(try store.loadLatest() == nil)
            try flipByte(newest, at: 64 + 50)  // repaired
            #expect(try store.loadLatest()?.lsn == 9)
            // Truncated files are damaged too.
            try PosixFileSystem().open(newest, options: []).truncate(to: 100)
            #expect(try store.loadLatest() == nil)
        }
    }

    @Test("leftover temp files of interrupted writes are ignored, then cleaned up")
    func tempLeftovers() async throws {
        try await withTempDirectory { dir in
            let store = CheckpointStore(directory: dir)
            try store.write(lsn: 5, next: nil, payload: [5])
            let temp = dir + "/checkpoint-00000000000000000006.ckpt.tmp"
            let good = CheckpointStore(directory: dir + "/other")
            try good.write(lsn: 6, next: nil, payload: [6])  // a complete, valid checkpoint under a temp name
            try FileManager.default.copyItem(atPath: dir + "/other/checkpoint-00000000000000000006.ckpt", toPath: temp)
            #expect(try store.loadLatest()?.lsn == 5)
            try store.write(lsn: 7, next: nil, payload: [7])
            #expect(!FileManager.default.fileExists(atPath: temp))
            #expect(try store.loadLatest()?.payload == [7])
        }
    }

    @Test("a written checkpoint survives a crash; an interrupted one leaves the previous")
    func crash() throws {
        let fs = InMemoryFileSystem()
        let store = CheckpointStore(directory: "/c", fileSystem: fs)
        try store.write(lsn: 1, next: nil, payload: [1])
        fs.crash()
        #expect(try store.loadLatest()?.payload == [1])

        let faulty = FaultInjectingFileSystem(wrapping: fs)
        faulty.failFdatasync(nth: 1)
        let failing = CheckpointStore(directory: "/c", fileSystem: faulty)
        #expect(throws: CloudletError.self) { try failing.write(lsn: 2, next: nil, payload: [2]) }
        fs.crash()
        #expect(try store.loadLatest()?.lsn == 1)
    }
}
