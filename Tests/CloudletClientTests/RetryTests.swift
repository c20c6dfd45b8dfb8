import CloudletClient
import CloudletCore
import Synchronization
import Testing

/// A transport that answers from a script and counts what it was sent.
final class ScriptedTransport: HTTPTransport {
    enum Step: Sendable {
        case respond(Int, String)
        case fail(TransportFailure.Stage)
    }

    private let script: Mutex<[Step]>
    private let sent = Mutex<[HTTPClientRequest]>([])

    init(_ steps: [Step]) { script = Mutex(steps) }

    var requests: [HTTPClientRequest] { sent.withLock { $0 } }

    func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        sent.withLock { $0.append(request) }
        let step = script.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        switch step {
        case .respond(let status, let body)?: return HTTPClientResponse(status: status, body: Array(body.utf8))
        case .fail(let stage)?: throw TransportFailure(stage, "scripted \(stage) failure")
        case nil: throw TransportFailure(.connecting, "script exhausted")
        }
    }
}

@Suite struct RetryTests {
    static let throttled = #"{"serverErrorCode":"THROTTLED","reason":"slow down","retryAfter":0.01}"#
    static let unavailable = #"{"serverErrorCode":"TRY_AGAIN_LATER","reason":"busy"}"#
    static let lookupAnswer = #"{"records":[{"recordName":"r1","recordType":"Note","recordChangeTag":"t1","fields":{}}]}"#

    static func database(_ transport: ScriptedTransport, retry: RetryPolicy) -> RemoteDatabase {
        CloudletClient(url: "http://127.0.0.1:9/", apiToken: "api token", webAuthToken: "w+t", transport: transport, retry: retry)
            .container("iCloud.com.example.retry").privateDatabase
    }

    @Test func throttledAndUnavailableRequestsAreSentAgainUntilTheyGoThrough() async throws {
        let t = ScriptedTransport([.respond(503, Self.throttled), .respond(503, Self.unavailable), .respond(200, Self.lookupAnswer)])
        let r = try await Self.database(t, retry: RetryPolicy(maxAttempts: 5, initialDelay: 0.001)).record(
            for: RecordID(recordName: "r1"))
        #expect(r.recordName == "r1" && r.changeTag == "t1")
        #expect(t.requests.count == 3)
        // The request went to CloudKit's path, tokens escaped.
        let url = try #require(t.requests.first?.url)
        #expect(url.hasPrefix("http://127.0.0.1:9/database/1/iCloud.com.example.retry/development/private/records/lookup?"), "\(url)")
        #expect(url.contains("ckAPIToken=api%20token") && url.contains("ckWebAuthToken=w%2Bt"), "\(url)")
    }

    @Test func retriesStopAtTheCapWithTheServersError() async throws {
        let t = ScriptedTransport(Array(repeating: .respond(503, Self.throttled), count: 5))
        await #expect(throws: CloudletError.self) {
            _ = try await Self.database(t, retry: RetryPolicy(maxAttempts: 3, initialDelay: 0.001)).record(
                for: RecordID(recordName: "r1"))
        }
        #expect(t.requests.count == 3)
        do {
            _ = try await Self.database(ScriptedTransport([.respond(503, Self.throttled)]), retry: .never).record(
                for: RecordID(recordName: "r1"))
        } catch let e as CloudletError {
            #expect(e.code == .serviceUnavailable && e.message == "slow down", "\(e)")
        }
    }

    @Test func theServersRetryAfterSetsTheWaitAndBackoffGrowsWithoutIt() {
        let p = RetryPolicy(maxAttempts: 5, initialDelay: 0.1, maxDelay: 5, multiplier: 2)
        #expect(p.delay(afterAttempt: 1, retryAfter: 2.5, jitter: 1) == 2.5)
        #expect(p.delay(afterAttempt: 3, retryAfter: 60, jitter: 1) == 5)  // capped
        #expect(p.delay(afterAttempt: 1, retryAfter: nil, jitter: 1) == 0.1)
        #expect(abs(p.delay(afterAttempt: 3, retryAfter: nil, jitter: 1) - 0.4) < 1e-9)
        #expect(abs(p.delay(afterAttempt: 3, retryAfter: nil, jitter: 0.5) - 0.2) < 1e-9)
        #expect(p.delay(afterAttempt: 20, retryAfter: nil, jitter: 1) == 5)
    }

    @Test func aWriteIsNotSentAgainOnceItMayHaveReachedTheServer() async throws {
        // A connection broken mid-exchange: the write may have been applied, so it is reported, not repeated.
        let t = ScriptedTransport([.fail(.exchanging), .respond(200, #"{"records":[]}"#)])
        let db = Self.database(t, retry: RetryPolicy(maxAttempts: 5, initialDelay: 0.001))
        do {
            _ = try await db.modify([.forceDelete(RecordID(recordName: "r1"))], atomic: true)
            Issue.record("a write was retried after the exchange failed")
        } catch let e as CloudletError {
            #expect(e.code == .serviceUnavailable, "\(e)")
        }
        #expect(t.requests.count == 1)

        // A read is: it changes nothing.
        let r = ScriptedTransport([.fail(.exchanging), .respond(200, Self.lookupAnswer)])
        _ = try await Self.database(r, retry: RetryPolicy(maxAttempts: 5, initialDelay: 0.001)).record(for: RecordID(recordName: "r1"))
        #expect(r.requests.count == 2)

        // And so is a write that never left (connection refused).
        let w = ScriptedTransport([.fail(.connecting), .respond(200, #"{"records":[{"recordName":"r1","deleted":true}]}"#)])
        let results = try await Self.database(w, retry: RetryPolicy(maxAttempts: 5, initialDelay: 0.001)).modify(
            [.forceDelete(RecordID(recordName: "r1"))], atomic: true)
        #expect(w.requests.count == 2)
        if case .deleted(let id) = results[0] { #expect(id.recordName == "r1") } else { Issue.record("\(results[0])") }
    }

    @Test func errorsThatRetryingCannotFixAreNotRetried() async throws {
        let t = ScriptedTransport([
            .respond(409, #"{"serverErrorCode":"ACCESS_DENIED","reason":"no","cloudletErrorCode":"permissionFailure"}"#),
            .respond(200, Self.lookupAnswer),
        ])
        do {
            _ = try await Self.database(t, retry: RetryPolicy(maxAttempts: 5, initialDelay: 0.001)).record(
                for: RecordID(recordName: "r1"))
            Issue.record("ACCESS_DENIED was retried into a success")
        } catch let e as CloudletError {
            #expect(e.code == .permissionFailure)
        }
        #expect(t.requests.count == 1)
    }

    @Test func aMalformedResponseIsAnErrorNamingWhatWasWrong() async throws {
        let t = ScriptedTransport([.respond(200, #"{"records":[{"recordType":"Note"}]}"#)])
        do {
            _ = try await Self.database(t, retry: .never).record(for: RecordID(recordName: "r1"))
            Issue.record("a record without a name was accepted")
        } catch let e as CloudletError {
            #expect(e.code == .internalError && e.message.contains("records[0].recordName"), "\(e)")
        }
        let wrongCount = ScriptedTransport([.respond(200, #"{"records":[]}"#)])
        do {
            _ = try await Self.database(wrongCount, retry: .never).record(for: RecordID(recordName: "r1"))
            Issue.record("an empty answer to a lookup was accepted")
        } catch let e as CloudletError {
            #expect(e.message.contains("0 records for 1 requested"), "\(e)")
        }
    }
}
