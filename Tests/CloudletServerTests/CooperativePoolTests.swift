import CloudletTestSupport
import Foundation
import Synchronization
import Testing

@testable import CloudletServer

/// A request handled by a front-end worker needs no thread of Swift's cooperative pool to finish: what its handler
/// awaits (``ThreadBridge/wait(_:)``) goes on, after a suspension, on an executor of the server's own.
@Suite struct CooperativePoolTests {
    @Test func aModifyAndALookupOverHTTPCompleteWhileEveryThreadOfTheCooperativePoolIsBlocked() async throws {
        let live = try await LiveServer.start()
        let modify = live.url("records/modify").replacingOccurrences(of: live.server.url, with: "")
        let lookup = live.url("records/lookup").replacingOccurrences(of: live.server.url, with: "")
        let base = live.server.url
        do {
            try await FrontEndTests.onThread { c in
                let pool = PoolBlocker()
                defer { pool.release() }
                c.expect(pool.saturate(), "could not saturate the cooperative pool with \(pool.blockers) blocking tasks")
                // A create waits for its commit to be written (the committer resumes it): a suspension.
                let http = try BlockingHTTPConnection(base)
                let created = try http.post(modify, #"{"operations":[\#(createOp("while-blocked"))]}"#)
                let createdText = String(decoding: created.body, as: UTF8.self)
                c.expect(created.status == 200 && createdText.contains(#""recordChangeTag""#), "\(created.status) \(createdText)")
                let found = try http.post(lookup, #"{"records":[{"recordName":"while-blocked"}]}"#)
                let foundText = String(decoding: found.body, as: UTF8.self)
                c.expect(found.status == 200 && foundText.contains(#""title""#), "\(found.status) \(foundText)")
                // Writers at once on one partition: all but one queue for its writer and are resumed by its thread.
                let answers = Mutex<[Int]>([])
                let group = DispatchGroup()
                for w in 0..<4 {
                    group.enter()
                    Thread.detachNewThread {
                        defer { group.leave() }
                        guard let conn = try? BlockingHTTPConnection(base) else { return }
                        for i in 0..<3 {
                            let op = createOp("w\(w)-\(i)")
                            let status = (try? conn.post(modify, #"{"operations":[\#(op)]}"#))?.status ?? 0
                            answers.withLock { $0.append(status) }
                        }
                    }
                }
                // Bounded only so that a failing test ends; the connections' own receive timeout is 20 s.
                c.expect(group.wait(timeout: .now() + 120) == .success, "the concurrent writers did not finish")
                let statuses = answers.withLock { $0 }
                c.expect(statuses.count == 12 && statuses.allSatisfy { $0 == 200 }, "\(statuses)")
                c.expect(pool.stillBlocked, "the pool was released before the requests were answered")
            }
        } catch {
            await live.shutdown()
            throw error
        }
        await live.shutdown()
    }
}
