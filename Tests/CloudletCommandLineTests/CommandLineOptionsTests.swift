import CloudletCommandLine
import Testing

@Suite("CommandLineOptions: the option parser of cloudlet, cloudlet-tool and cloudlet-bench")
struct CommandLineOptionsTests {
    func parse(_ args: [String], positional: Bool = false) throws(UsageError) -> CommandLineOptions {
        try CommandLineOptions(parsing: args, valued: ["--data", "--port", "--filter"], flags: ["--json"], positional: positional)
    }

    func problem(_ args: [String], positional: Bool = false) -> String? {
        do throws(UsageError) {
            _ = try parse(args, positional: positional)
            return nil
        } catch {
            return error.message
        }
    }

    @Test("valued options as `--name value` or `--name=value`, flags, repeats, positional arguments")
    func values() throws {
        let o = try parse(["--data", "d", "--json", "--filter=a,b", "x", "--filter", "c", "--port=", "-"], positional: true)
        #expect(o["--data"] == "d")
        #expect(o.has("--json") && !o.has("--quick"))
        #expect(o["--filter"] == "c" && o.values("--filter") == ["a,b", "c"])
        #expect(o["--port"] == "")
        #expect(o["--missing"] == nil && o.values("--missing") == [])
        #expect(o.positional == ["x", "-"])
        #expect(!o.helpRequested)
        // A value is the next argument, whatever it looks like.
        #expect(try parse(["--data", "--json"])["--data"] == "--json")
        #expect(try parse(["--data=a=b"])["--data"] == "a=b")
    }

    @Test("what does not fit is refused, naming the option or argument")
    func errors() {
        #expect(problem(["--data"]) == "--data needs a value")
        #expect(problem(["--json=yes"]) == "--json takes no value")
        #expect(problem(["--bogus"]) == "unknown option --bogus")
        #expect(problem(["--bogus=1"]) == "unknown option --bogus")
        #expect(problem(["-x"], positional: true) == "unknown option -x")
        #expect(problem(["stray"]) == "unexpected argument 'stray'")
        #expect(problem(["--json", "stray", "--bogus"]) == "unexpected argument 'stray'")
    }

    @Test("-h and --help stop parsing", arguments: [["--help"], ["-h"], ["--json", "--help", "--bogus"], ["--help=1"]])
    func help(_ args: [String]) throws {
        let o = try parse(args)
        #expect(o.helpRequested)
        #expect(problem(["--bogus", "--help"]) == "unknown option --bogus")
    }

    @Test("required options and integers in a range")
    func requiredAndIntegers() throws {
        let o = try parse(["--port", "80", "--filter", "x"])
        #expect(try o.required("--port", "P") == "80")
        #expect(throws: UsageError(message: "--data DIR is required")) { try o.required("--data", "DIR") }
        #expect(try o.integer("--port", in: 0...65535) == 80)
        #expect(try o.integer("--data", in: 0...1) == nil)
        #expect(throws: UsageError(message: "--port must be a number from 100 to 200, not '80'")) {
            try o.integer("--port", in: 100...200)
        }
        #expect(throws: UsageError(message: "--filter must be a whole number of at least 1, not 'x'")) {
            try o.integer("--filter", in: 1...Int.max, "a whole number")
        }
        #expect(throws: UsageError(message: "--port must be a number of bytes from 0 to 1, not '80'")) {
            try o.integer("--port", in: 0...1, "a number of bytes")
        }
    }
}
