import Foundation

/// A minimal keep-alive HTTP/1.1 client over one TCP connection, with blocking POSIX calls: for threads that talk to
/// a server that may be killed mid-request. (corelibs URLSession traps with "Transfer completed, but there's no
/// response" when that happens, and cancelling its requests can deadlock.)
final class BlockingHTTPConnection {
    struct Failure: Error { var message: String }

    private let fd: Int32
    private let host: String
    private var buffer: [UInt8] = []

    /// Connects to `url`'s host and port (`http://127.0.0.1:8080`).
    init(_ url: String) throws {
        let parts = url.replacingOccurrences(of: "http://", with: "").split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1]) else { throw Failure(message: "bad URL \(url)") }
        host = String(parts[0])
        do {
            fd = try RawSocket.connect(port: Int(port), host: host, receiveTimeout: 20)
        } catch let e as RawSocket.Failure {
            throw Failure(message: e.message)
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { Glibc.close(fd) }

    /// POSTs `body` to `path` (with its query string); returns the status and body.
    func post(_ path: String, _ body: String) throws -> (status: Int, body: [UInt8]) {
        try send(Self.postRequest(path, Array(body.utf8), host: host))
        return try readResponse()
    }

    /// Sends these POSTs in one go, each right behind the one before (pipelined), and reads their answers in order.
    func pipeline(_ posts: [(path: String, body: [UInt8])]) throws -> [(status: Int, body: [UInt8])] {
        try send(posts.flatMap { Self.postRequest($0.path, $0.body, host: host) })
        return try posts.map { _ in try readResponse() }
    }

    private static func postRequest(_ path: String, _ body: [UInt8], host: String) -> [UInt8] {
        let head = "POST \(path) HTTP/1.1\r\nHost: \(host)\r\nContent-Type: text/plain\r\nContent-Length: \(body.count)\r\n\r\n"
        return Array(head.utf8) + body
    }

    /// The next response's status and body (a `Content-Length` one).
    private func readResponse() throws -> (status: Int, body: [UInt8]) {
        let headerEnd = try readUntilHeaderEnd()
        let header = String(decoding: buffer[0..<headerEnd], as: UTF8.self)
        buffer.removeFirst(headerEnd + 4)
        let lines = header.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.split(separator: " ").count >= 2,
            let status = Int(statusLine.split(separator: " ")[1])
        else { throw Failure(message: "bad status line in \(header)") }
        let length = lines.dropFirst().compactMap { line -> Int? in
            let kv = line.split(separator: ":", maxSplits: 1)
            return kv.count == 2 && kv[0].lowercased() == "content-length" ? Int(kv[1].trimmingCharacters(in: .whitespaces)) : nil
        }.first ?? 0
        while buffer.count < length { try fill() }
        let out = Array(buffer[0..<length])
        buffer.removeFirst(length)
        return (status, out)
    }

    /// Sends a POST's head announcing `declaredLength` bytes and only `prefix` of them, and returns without reading
    /// anything: a client that stalls (or a server killed) mid-upload.
    func startPost(_ path: String, declaredLength: Int, prefix: [UInt8]) throws {
        let head = "POST \(path) HTTP/1.1\r\nHost: \(host)\r\nContent-Length: \(declaredLength)\r\n\r\n"
        try send(Array(head.utf8) + prefix)
    }

    private func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(message: "send: errno \(errno)") }
            offset += n
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { throw Failure(message: n == 0 ? "connection closed" : "recv: errno \(errno)") }
        buffer += chunk[0..<n]
    }

    private func readUntilHeaderEnd() throws -> Int {
        let marker: [UInt8] = [13, 10, 13, 10]
        while true {
            if buffer.count >= 4 {
                for i in 0...(buffer.count - 4) where buffer[i] == 13 && Array(buffer[i..<(i + 4)]) == marker { return i }
            }
            try fill()
        }
    }
}
