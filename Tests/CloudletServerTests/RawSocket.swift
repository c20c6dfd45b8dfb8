import Foundation

/// A TCP connection to a test server with blocking POSIX calls, for requests no HTTP client would send (framing
/// attacks, half-sent headers, websocket handshakes, clients that never read).
final class RawSocket {
    struct Failure: Error { var message: String }

    let fd: Int32
    /// Whether the last read to the end ended because the server closed the connection (not the receive timeout).
    private(set) var closedByServer = false

    /// Connects to 127.0.0.1:`port`, from `source` (another loopback address) when given.
    init(port: Int, source: String? = nil, receiveTimeout: Int = 10, receiveBuffer: Int32? = nil) throws {
        fd = try Self.connect(port: port, source: source, receiveTimeout: receiveTimeout, receiveBuffer: receiveBuffer)
    }

    /// A connected socket to `host`:`port` (from `source` when given); the caller closes it.
    static func connect(
        port: Int, host: String = "127.0.0.1", source: String? = nil, receiveTimeout: Int, receiveBuffer: Int32? = nil
    ) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(message: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        if let source {
            var local = address(source, port: 0)
            let rc = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard rc == 0 else {
                Glibc.close(fd)
                throw Failure(message: "bind \(source): errno \(errno)")
            }
        }
        var addr = address(host, port: port)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            Glibc.close(fd)
            throw Failure(message: "connect: errno \(errno)")
        }
        return fd
    }

    deinit { Glibc.close(fd) }

    private static func address(_ host: String, port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, host, &addr.sin_addr)
        return addr
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(message: "send: errno \(errno)") }
            offset += n
        }
    }

    /// Reads until the server closes the connection (or the receive timeout passes).
    func readToEnd() -> String {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 {
                closedByServer = n == 0 || errno == ECONNRESET
                break
            }
            out += chunk[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Reads until `marker` has arrived (or the connection ends); returns everything read.
    func read(until marker: String) -> String {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !String(decoding: out, as: UTF8.self).contains(marker) {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out += chunk[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Opens a websocket on `path`: sends the handshake and reads the answer's head.
    func webSocketHandshake(_ path: String) throws -> String {
        try send(
            "GET \(path) HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        return read(until: "\r\n\r\n")
    }
}
