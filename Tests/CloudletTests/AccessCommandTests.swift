import CloudletConcurrency
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// `cloudlet role`, `cloudlet key`, and the token and user life cycle, through the built executable on a store
/// directory: what a user types, the exit codes and what is printed.
@Suite struct AccessCommandTests {
    func cloudlet(_ args: String...) async throws -> (status: Int32, out: String, err: String) {
        try await ThreadBridge.offload { try QueryCommandTests.run(args, stdin: nil) }
    }

    @Test func keysRolesTokensAndUsersFromTheCommandLine() async throws {
        let dir = TempDir("cli-access")
        let data = dir.sub("store")
        let c = "iCloud.com.example.app"
        #expect(try await cloudlet("token", "add", "--container", c, "--data", data).status == 0)
        let admin = try await cloudlet("token", "add", "--admin", "--data", data)
        #expect(admin.status == 0 && admin.out.contains("admin credential"), "\(admin)")
        let tokens = try await cloudlet("token", "list", "--data", data)
        #expect(tokens.out.split(separator: "\n").count == 2 && tokens.out.contains("admin") && tokens.out.contains(c), "\(tokens)")
        let adminID = try #require(tokens.out.split(separator: "\n").first { $0.contains("admin") }?.split(separator: " ").first)
        #expect(try await cloudlet("token", "revoke", String(adminID), "--data", data).status == 0)
        #expect(!(try await cloudlet("token", "list", "--data", data).out.contains("admin")))

        // Users: discoverable with an email, listed, rotated, removed.
        let added = try await cloudlet("user", "add", "bob", "--email", "bob@example.com", "--discoverable", "--token-ttl", "3600", "--data", data)
        #expect(added.status == 0, "\(added)")
        let users = try await cloudlet("user", "list", "--json", "--data", data)
        #expect(users.out.contains(#""name":"bob""#) && users.out.contains(#""discoverable":true"#), "\(users)")
        let rotated = try await cloudlet("user", "rotate", "bob", "--data", data)
        #expect(rotated.status == 0 && rotated.out.split(separator: "\n").last?.count == 64, "\(rotated)")

        // Roles: a role the schema creates, a member, and the errors a typo gets.
        let schema = dir.sub("schema.txt")
        try "DEFINE SCHEMA CREATE ROLE Editors; RECORD TYPE Post (body STRING, GRANT READ, WRITE TO Editors);"
            .write(toFile: schema, atomically: true, encoding: .utf8)
        let imported = try await cloudlet("schema", "import", "--container", c, "--file", schema, "--data", data)
        #expect(imported.out.contains("added role Editors") && imported.out.contains("set grants Post"), "\(imported)")
        #expect(try await cloudlet("role", "add-member", "--container", c, "--role", "Editors", "--user", "bob", "--data", data).status == 0)
        let listed = try await cloudlet("role", "list", "--container", c, "--data", data)
        #expect(listed.out.contains("Editors (development): bob"), "\(listed)")
        let unknown = try await cloudlet("role", "add-member", "--container", c, "--role", "Editrs", "--user", "bob", "--data", data)
        #expect(unknown.status == 65 && unknown.err.contains("role 'Editrs' does not exist"), "\(unknown)")
        let nobody = try await cloudlet("role", "add-member", "--container", c, "--role", "Editors", "--user", "zed", "--data", data)
        #expect(nobody.status != 0 && nobody.err.contains("no user named 'zed'"), "\(nobody)")
        #expect(try await cloudlet("user", "remove", "bob", "--data", data).status == 0)
        #expect(!(try await cloudlet("user", "list", "--data", data).out.contains("bob")))

        // Keys: made by openssl, added, listed, revoked; a private key is refused with a hint.
        let priv = dir.sub("k.pem"), pub = dir.sub("k.pub.pem")
        #expect(try await ChildProcess.run("/usr/bin/openssl", ["ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", priv]).status == 0)
        #expect(try await ChildProcess.run("/usr/bin/openssl", ["ec", "-in", priv, "-pubout", "-out", pub]).status == 0)
        let key = try await cloudlet("key", "add", "--container", c, "--public-key", pub, "--data", data)
        let id = try #require(key.out.split(separator: "\n").last.map(String.init), "\(key)")
        #expect(key.status == 0 && id.count == 64, "\(key)")
        #expect(try await cloudlet("key", "list", "--json", "--data", data).out.contains(#""keyID":"\#(id)","container":"\#(c)","revoked":false"#))
        #expect(try await cloudlet("key", "revoke", id, "--data", data).status == 0)
        #expect(try await cloudlet("key", "list", "--data", data).out.contains("revoked"))
        let wrong = try await cloudlet("key", "add", "--container", c, "--public-key", priv, "--data", data)
        #expect(wrong.status == 65 && wrong.err.contains("openssl ec -in"), "\(wrong)")
    }
}
