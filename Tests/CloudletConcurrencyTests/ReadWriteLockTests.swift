import CloudletConcurrency
import Dispatch
import Foundation
import Synchronization
import Testing

@Suite struct ReadWriteLockTests {
    @Test func readersHoldTheLockAtOnceAndSeeWhatAWriterWrote() async {
        let lock = ReadWriteLock([1])
        lock.write { $0.append(2) }
        let (bothInside, seen) = await withCheckedContinuation { c in
            Thread.detachNewThread {
                // Each reader signals it is inside, then waits (bounded: the bound only ends a failing test) for the
                // other to be inside too — which an exclusive lock would never allow.
                let first = DispatchSemaphore(value: 0), second = DispatchSemaphore(value: 0)
                let other = DispatchSemaphore(value: 0)
                let seenByOther = Mutex<[Int]>([])
                Thread.detachNewThread {
                    lock.read { v in
                        seenByOther.withLock { $0 = v }
                        second.signal()
                        _ = first.wait(timeout: .now() + 10)
                    }
                    other.signal()
                }
                let inside = lock.read { _ in
                    first.signal()
                    return second.wait(timeout: .now() + 10) == .success
                }
                other.wait()
                c.resume(returning: (inside, seenByOther.withLock { $0 }))
            }
        }
        #expect(bothInside)
        #expect(seen == [1, 2])
    }
}
