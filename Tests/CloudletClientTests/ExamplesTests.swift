import CloudletTestSupport
import Foundation
import Testing

/// The seed apps under Examples/, run as a user would — each on an embedded store and against a server over
/// loopback — with their output checked line by line.
@Suite struct ExamplesTests {
    /// Where an example keeps its data: `--data DIR`, or a server's URL and alice's tokens.
    enum Place {
        case embedded(String)
        case remote(ClientFixture)

        var arguments: [String] {
            switch self {
            case .embedded(let dir): ["--data", dir, "--container", ClientFixture.container]
            case .remote(let f):
                [
                    "--server", f.server.url, "--api-token", f.apiToken, "--web-auth-token", f.alice.token, "--container",
                    ClientFixture.container,
                ]
            }
        }
    }

    /// Runs an example; returns its exit status and stdout lines (stderr goes into the failure message).
    static func run(_ example: String, _ args: [String], at place: Place) async throws -> (status: Int32, out: [String]) {
        let r = try await ChildProcess.run(try builtExecutable(example), args + place.arguments)
        if r.status != 0 && r.status != 2 { Issue.record("\(example) \(args.joined(separator: " ")) exited \(r.status): \(r.err)") }
        return (r.status, r.out)
    }

    /// Runs `body` once on an embedded store and once against a server.
    static func inBothPlaces(_ body: (Place) async throws -> Void) async throws {
        let dir = TempDir("examples")
        try await body(.embedded(dir.sub("store")))
        try await withFixture { f in try await body(.remote(f)) }
    }

    @Test func journalAddsListsNewestFirstEditsWithConflictsAndDeletes() async throws {
        try await Self.inBothPlaces { place in
            let first = try await Self.run("journal", ["add", "first entry", "--title", "One"], at: place).out
            try await Task.sleep(nanoseconds: 5_000_000)  // distinct `written` timestamps (milliseconds)
            let second = try await Self.run("journal", ["add", "second entry"], at: place).out
            let firstID = try #require(first.first?.split(separator: " ").last.map(String.init))
            let secondID = try #require(second.first?.split(separator: " ").last.map(String.init))
            let list = try await Self.run("journal", ["list"], at: place).out
            #expect(list == ["\(secondID)\tsecond entry\tsecond entry", "\(firstID)\tOne\tfirst entry"])

            let shown = try await Self.run("journal", ["show", firstID], at: place).out
            let tag = try #require(shown.first?.split(separator: "\t")[1].dropFirst(4).description)
            #expect(try await Self.run("journal", ["edit", firstID, "changed"], at: place).out.first?.hasPrefix("edited") == true)
            let stale = try await Self.run("journal", ["edit", firstID, "stale", "--tag", tag], at: place)
            #expect(stale.status == 2)
            #expect(stale.out.first?.hasPrefix("conflict: \(firstID) changed since version \(tag); it now says: changed") == true, "\(stale)")

            #expect(try await Self.run("journal", ["delete", secondID], at: place).out == ["deleted \(secondID)"])
            #expect(try await Self.run("journal", ["list"], at: place).out == ["\(firstID)\tOne\tchanged"])
        }
    }

    @Test func shoppingListsSortByNameAndDeletingAListDeletesItsItems() async throws {
        try await Self.inBothPlaces { place in
            for args in [
                ["add-list", "hardware"], ["add-list", "groceries"], ["add-item", "groceries", "milk", "--quantity", "2"],
                ["add-item", "groceries", "bread"], ["add-item", "hardware", "nails"], ["check", "groceries", "milk"],
                ["rename-item", "groceries", "bread", "rolls"],
            ] {
                _ = try await Self.run("shopping-lists", args, at: place)
            }
            #expect(try await Self.run("shopping-lists", ["lists"], at: place).out == ["groceries\t2 items", "hardware\t1 items"])
            #expect(try await Self.run("shopping-lists", ["items", "groceries"], at: place).out == ["milk\t2\tdone", "rolls\t1\t"])
            #expect(
                try await Self.run("shopping-lists", ["delete-list", "groceries"], at: place).out
                    == ["deleted list groceries and its 2 items"])
            #expect(try await Self.run("shopping-lists", ["lists"], at: place).out == ["hardware\t1 items"])
            // The items went with the list (DELETE_SELF): adding the list again finds none.
            _ = try await Self.run("shopping-lists", ["add-list", "groceries"], at: place)
            #expect(try await Self.run("shopping-lists", ["items", "groceries"], at: place).out == ["(no items)"])
        }
    }

    @Test func babifudFindsEstablishmentsNearestFirstWithPhotosAndPrivateNotes() async throws {
        let dir = TempDir("babifud")
        let photo = dir.sub("photo.jpg")
        try Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 * 7) }).write(to: URL(fileURLWithPath: photo))
        try await Self.inBothPlaces { place in
            _ = try await Self.run("babifud", ["add", "cafe", "--lat", "52.52", "--lon", "13.40", "--photo", photo, "--changing-table"], at: place)
            _ = try await Self.run("babifud", ["add", "bar", "--lat", "52.50", "--lon", "13.45"], at: place)
            _ = try await Self.run("babifud", ["add", "far", "--lat", "48.1", "--lon", "11.5"], at: place)
            #expect(
                try await Self.run("babifud", ["near", "--lat", "52.51", "--lon", "13.41", "--km", "20"], at: place).out
                    == ["cafe\t1.3 km\tchanging table", "bar\t2.9 km"])
            #expect(try await Self.run("babifud", ["show", "cafe"], at: place).out == ["cafe\t52.52,13.4\tphoto 5000 bytes"])
            _ = try await Self.run("babifud", ["note", "cafe", "great cake"], at: place)
            _ = try await Self.run("babifud", ["note", "cafe", "loud"], at: place)
            #expect(try await Self.run("babifud", ["notes", "cafe"], at: place).out.map { $0.split(separator: "\t").last ?? "" } == ["great cake", "loud"])
            #expect(try await Self.run("babifud", ["notes", "bar"], at: place).out == ["(no notes)"])
        }
    }

    @Test func photosStoresImagesAsAssetsAndDownloadsThemBack() async throws {
        let dir = TempDir("photos")
        let image = dir.sub("beach.jpg")
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
        try Data(bytes).write(to: URL(fileURLWithPath: image))
        try await Self.inBothPlaces { place in
            let added = try await Self.run("photos", ["add", image, "--title", "beach"], at: place).out
            let id = try #require(added.first?.split(separator: " ").last.map(String.init))
            let list = try await Self.run("photos", ["list"], at: place).out
            #expect(list.count == 1 && list[0].hasPrefix("\(id)\tbeach\t300000\t"), "\(list)")
            let out = dir.sub("out-\(UUID().uuidString).jpg")
            #expect(try await Self.run("photos", ["download", id, out], at: place).out == ["wrote 300000 bytes to \(out)"])
            #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == Data(bytes))
            _ = try await Self.run("photos", ["delete", id], at: place)
            #expect(try await Self.run("photos", ["list"], at: place).out == ["(no photos)"])
        }
    }

    @Test func tripsAreSharedAcceptedEditedByTheParticipantAndGoneWhenUnshared() async throws {
        try await Self.inBothPlaces { place in
            // Who runs a command: alice or bob (embedded: --user; remote: their web auth token), and bob's and
            // alice's user record names as the other one names them.
            func run(_ user: String, _ args: [String]) async throws -> [String] {
                var a = place.arguments
                switch place {
                case .embedded: a += ["--user", user]
                case .remote(let f):
                    let i = a.firstIndex(of: "--web-auth-token")!
                    a[i + 1] = user == "alice" ? f.alice.token : f.bob.token
                }
                let r = try await ChildProcess.run(try builtExecutable("trips"), args + a)
                if r.status != 0 { Issue.record("trips \(args.joined(separator: " ")) as \(user) exited \(r.status): \(r.err)") }
                return r.out
            }
            let (alice, bob): (String, String)
            switch place {
            case .embedded: (alice, bob) = ("alice", "bob")
            case .remote(let f): (alice, bob) = (f.alice.user.userRecordName, f.bob.user.userRecordName)
            }
            let added = try await run("alice", ["add", "Lisbon"])
            let id = try #require(added.first?.split(separator: " ").last.map(String.init), "\(added)")
            _ = try await run("alice", ["add", "Porto"])
            let shared = try await run("alice", ["share", id, bob, "--write"])
            let guid = try #require(shared.first?.split(separator: " ").last.map(String.init), "\(shared)")
            #expect(try await run("bob", ["shared"]) == ["(nothing shared with you)"])
            #expect(try await run("bob", ["accept", guid]) == ["joined \(id) of \(alice) (READ_WRITE)"])
            #expect(try await run("bob", ["edit", alice, id, "Lisbon, 3 nights"]) == ["renamed \(id)"])
            #expect(try await run("bob", ["add-day", alice, id, "Alfama"]) == ["added a day to \(id)"])
            #expect(try await run("bob", ["shared"]) == ["\(alice)\t\(id)\tLisbon, 3 nights\tdays: Alfama"])
            let list = try await run("alice", ["list"])
            #expect(list.count == 2 && list[0] == "\(id)\tLisbon, 3 nights\tshared \(guid)" && list[1].hasSuffix("\tPorto"), "\(list)")
            #expect(try await run("alice", ["unshare", id]) == ["stopped sharing \(id)"])
            #expect(try await run("bob", ["shared"]) == ["(nothing shared with you)"])
        }
    }

    @Test func examplesExplainBadUsageAndExit64() async throws {
        for example in ["journal", "shopping-lists", "babifud", "photos", "trips"] {
            let r = try await ChildProcess.run(try builtExecutable(example), ["list"])
            #expect(r.status == 64, "\(example): \(r)")
            #expect(r.err.first == "error: give --data DIR (embedded) or --server URL (remote)", "\(example): \(r.err)")
            let help = try await ChildProcess.run(try builtExecutable(example), ["--help"])
            #expect(help.status == 0 && help.out.first?.hasPrefix("USAGE: \(example)") == true, "\(example): \(help.out.prefix(2))")
        }
    }
}
