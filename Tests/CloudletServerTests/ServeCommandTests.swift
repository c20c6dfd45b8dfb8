import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// The `cloudlet` executable: `serve`, `token add`, `user add`, help and errors.
@Suite struct ServeCommandTests {
    @Test(arguments: [
        ["--help"], ["serve", "--help"], ["token", "--help"], ["token", "add", "--help"], ["user", "--help"],
        ["user", "add", "--help"],
    ])
    func helpGoesToStdoutWithExitZero(_ args: [String]) async throws {
        let r = try await ChildProcess.run(try cloudletExecutable(), args)
        #expect(r.status == 0, "\(args): \(r.err)")
        #expect(r.out.contains { $0.contains("USAGE") }, "\(args): \(r.out)")
        #expect(r.err.isEmpty)
    }

    @Test(arguments: [
        (["serve", "--port", "http"], Int32(64), "--port must be a number"),
        (["serve", "--durability", "never"], 64, "--durability must be fsync or os"),
        (["serve", "--tls-cert", "/nonexistent.pem"], 64, "--tls-cert and --tls-key go together"),
        (["serve", "--public-url", "ftp://db.example.com"], 64, "--public-url: public URL 'ftp://db.example.com' has scheme 'ftp'"),
        (["serve", "--public-url", "https://db.example.com/?to=evil"], 64, "has a query"),
        (["token", "add"], 64, "--container ID is required"),
        (["token", "frobnicate"], 64, "unknown token subcommand"),
        (["user", "add"], 64, "user add needs a NAME"),
        (["user", "add", "no spaces allowed"], 65, "user name 'no spaces allowed' is invalid"),
        (["token", "add", "--container", "com.example.app"], 65, "container identifier 'com.example.app' is invalid"),
    ])
    func badInvocationsFailWithAnError(_ args: [String], _ code: Int32, _ message: String) async throws {
        let dir = TempDir("cli-bad")
        let r = try await ChildProcess.run(try cloudletExecutable(), args + ["--data", dir.sub("store")])
        #expect(r.status == code, "\(args): \(r.err)")
        #expect(r.err.first?.hasPrefix("error: ") == true && r.err.joined().contains(message), "\(args): \(r.err)")
    }

    @Test func serveBootstrapsAFreshStoreStopsCleanlyAndTheCLIManagesItOffline() async throws {
        let dir = TempDir("serve")
        let data = dir.sub("store")
        let exe = try cloudletExecutable()

        // A fresh store: serve creates a token and a user and prints them with a curl example.
        let first = try await ServeChild.start(data: data, extra: ["--durability", "fsync"])
        let apiToken = try #require(first.apiToken), webToken = try #require(first.webAuthToken)
        #expect(first.child.stdout.contains { $0.contains("curl -s '\(first.url)/database/1/iCloud.com.example.app/") })
        let base = "\(first.url)/database/1/iCloud.com.example.app/development/private"
        let saved = try await HTTP.post(
            "\(base)/records/modify?ckAPIToken=\(apiToken)&ckWebAuthToken=\(webToken)", #"{"operations":[\#(createOp("kept"))]}"#)
        #expect(saved.records.first?["recordChangeTag"] != nil, "\(saved)")
        // … and an admin credential, which opens the console it names.
        let admin = try #require(first.adminToken)
        #expect(first.child.stdout.contains { $0.contains("\(first.url)/cloudlet/console/") })
        let console = try await HTTP.post("\(first.url)/cloudlet/console/api/signin", #"{"token":"\#(admin)"}"#)
        #expect(console.status == 200 && console.json["csrfToken"] != nil, "\(console)")

        // While it runs, the CLI refuses the store, saying why.
        let locked = try await ChildProcess.run(exe, ["user", "add", "erin", "--data", data])
        #expect(locked.status == 1)
        #expect(locked.err.joined().contains("locked") && locked.err.joined().contains("cloudlet serve"), "\(locked.err)")

        // SIGTERM: clean stop, exit 0, the access log on stderr.
        await first.child.stop(SIGTERM)
        #expect(first.child.process.terminationReason == .exit && first.child.process.terminationStatus == 0)
        #expect(first.child.stderr.contains { $0.contains("POST /database/1/iCloud.com.example.app/development/private/records/modify 200") })
        #expect(first.child.stderr.last?.contains("store closed") == true, "\(first.child.stderr)")

        // Offline: a token for another container and a new user.
        let token = try await ChildProcess.run(exe, ["token", "add", "--data", data, "--container", "iCloud.org.example.second"])
        #expect(token.status == 0, "\(token.err)")
        let secondToken = try #require(token.out.last)
        #expect(secondToken.count == 64 && secondToken.allSatisfy(\.isHexDigit))
        let user = try await ChildProcess.run(exe, ["user", "add", "frank", "--data", data])
        let frankToken = try #require(user.out.last)
        #expect(user.status == 0 && frankToken.count == 64, "\(user.err)")
        let duplicate = try await ChildProcess.run(exe, ["user", "add", "frank", "--data", data])
        #expect(duplicate.status == 1 && duplicate.err.joined().contains("user 'frank' already exists"), "\(duplicate.err)")

        // Restarted, the store is not fresh (no new tokens), and everything works together.
        let second = try await ServeChild.start(data: data)
        #expect(second.apiToken == nil)
        let old = try await HTTP.post(
            "\(second.url)/database/1/iCloud.com.example.app/development/private/records/lookup?ckAPIToken=\(apiToken)&ckWebAuthToken=\(webToken)",
            #"{"records":[{"recordName":"kept"}]}"#)
        #expect(old.records.first?["recordChangeTag"] == saved.records.first?["recordChangeTag"], "\(old)")
        let frank = try await HTTP.get(
            "\(second.url)/database/1/iCloud.org.example.second/production/public/users/caller?ckAPIToken=\(secondToken)&ckWebAuthToken=\(frankToken)")
        #expect(frank.json["nameComponents"]?["givenName"]?.stringValue == "frank", "\(frank)")
        await second.child.stop(SIGINT)
        #expect(second.child.process.terminationStatus == 0)
    }
}
