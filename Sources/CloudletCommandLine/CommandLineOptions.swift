#if canImport(Glibc)
import Glibc
#endif

/// The command line does not fit the command. The executables print `error: ` and the message on stderr and exit 64
/// (`EX_USAGE`).
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String

    public init(message: String) { self.message = message }

    public var description: String { message }
}

/// The options of one command, parsed by hand (no packages beyond the toolchain) the same way for `cloudlet`,
/// `cloudlet-tool` and `cloudlet-bench`:
///
/// - `--name value` or `--name=value` for an option in `valued`; it may be repeated, and every value is kept;
/// - `--name` for a flag in `flags` (`--name=value` is an error);
/// - `-h` or `--help` anywhere asks for the command's help: parsing stops there, what follows is not looked at;
/// - any other argument starting with `-` (but `-` alone) is an unknown option; the others are positional
///   arguments if the command takes them, errors otherwise.
///
/// ```swift
/// let o = try CommandLineOptions(args, valued: ["--data", "--port"], flags: ["--json"], help: help)
/// let data = try o.required("--data", "DIR")           // "--data DIR is required"
/// let port = try o.integer("--port", in: 0...65535)    // "--port must be a number from 0 to 65535, not 'x'"
/// ```
public struct CommandLineOptions: Sendable {
    /// The positional arguments, in order (always empty unless the command takes them).
    public private(set) var positional: [String] = []
    /// Whether `-h` or `--help` was given.
    public private(set) var helpRequested = false
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// Parses `arguments` (without the program's and the command's names). Throws the first problem found: "NAME
    /// needs a value", "NAME takes no value", "unknown option NAME", "unexpected argument 'ARG'".
    public init(
        parsing arguments: [String], valued: Set<String>, flags allowed: Set<String> = [], positional takesPositional: Bool = false
    ) throws(UsageError) {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            var name = argument
            var inline: String?
            if argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") {
                name = String(argument[..<eq])
                inline = String(argument[argument.index(after: eq)...])
            }
            if name == "--help" || name == "-h" {
                helpRequested = true
                return
            } else if valued.contains(name) {
                if let inline {
                    values[name, default: []].append(inline)
                } else {
                    guard let value = rest.popFirst() else { throw UsageError(message: "\(name) needs a value") }
                    values[name, default: []].append(value)
                }
            } else if allowed.contains(name) {
                guard inline == nil else { throw UsageError(message: "\(name) takes no value") }
                flags.insert(name)
            } else if name.hasPrefix("-") && name != "-" {
                throw UsageError(message: "unknown option \(name)")
            } else if takesPositional {
                positional.append(argument)
            } else {
                throw UsageError(message: "unexpected argument '\(argument)'")
            }
        }
    }

    /// Parses like ``init(parsing:valued:flags:positional:)``; when help is asked for, prints `help` on stdout and
    /// exits 0.
    public init(
        _ arguments: [String], valued: Set<String>, flags: Set<String> = [], positional: Bool = false, help: String
    ) throws(UsageError) {
        self = try CommandLineOptions(parsing: arguments, valued: valued, flags: flags, positional: positional)
        if helpRequested {
            print(help)
            exit(0)
        }
    }

    /// The last value given for the option `name`, nil if it was not given.
    public subscript(_ name: String) -> String? { values[name]?.last }

    /// Every value given for the option `name`, in order.
    public func values(_ name: String) -> [String] { values[name] ?? [] }

    /// Whether the flag `name` was given.
    public func has(_ flag: String) -> Bool { flags.contains(flag) }

    /// The value of `name`; throws "NAME PLACEHOLDER is required" (`--data DIR is required`) when it was not given.
    public func required(_ name: String, _ placeholder: String) throws(UsageError) -> String {
        guard let value = self[name] else { throw UsageError(message: "\(name) \(placeholder) is required") }
        return value
    }

    /// The value of `name` as a decimal integer in `range`, nil if it was not given. Anything else throws "NAME must
    /// be WHAT from LOW to HIGH, not 'VALUE'" (or "of at least LOW" when `range` goes to `Int.max`), where `what` is
    /// "a number" unless said otherwise ("a number of bytes").
    public func integer(_ name: String, in range: ClosedRange<Int>, _ what: String = "a number") throws(UsageError) -> Int? {
        guard let text = self[name] else { return nil }
        guard let n = Int(text), range.contains(n) else {
            let bounds = range.upperBound == .max
                ? "of at least \(range.lowerBound)" : "from \(range.lowerBound) to \(range.upperBound)"
            throw UsageError(message: "\(name) must be \(what) \(bounds), not '\(text)'")
        }
        return n
    }
}
