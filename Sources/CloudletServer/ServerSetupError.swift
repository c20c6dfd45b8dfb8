/// The server could not start: a port in use, a missing certificate, TLS unavailable.
public struct ServerSetupError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
