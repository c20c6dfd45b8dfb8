import CCurl
import COpenSSL
import CloudletCore

#if canImport(Glibc)
import Glibc
#endif

/// A websocket client connection (RFC 6455) for the server's notification feed. libcurl 7.88 (Debian's) has no
/// websocket support, but it connects, does TLS with the caller's CA file and hands over the connection
/// (`CURLOPT_CONNECT_ONLY`, then `curl_easy_send` / `curl_easy_recv`): this class speaks the upgrade and the frames
/// over it. Text and binary messages (fragmented or not) are received; pings are answered; a close frame ends the
/// connection. Blocking: use it from a thread that may block.
final class WebSocketConnection {
    private let handle: UnsafeMutableRawPointer
    private var buffer: [UInt8] = []
    private var open = true

    /// Connects to a `ws://` or `wss://` URL and completes the upgrade. - Throws: ``TransportFailure``.
    init(url: String, caFile: String?, timeout: Double) throws {
        guard let h = curl_easy_init() else { throw TransportFailure(.connecting, "curl_easy_init failed") }
        handle = h
        var http = url
        if http.hasPrefix("ws://") { http = "http://" + http.dropFirst(5) } else if http.hasPrefix("wss://") { http = "https://" + http.dropFirst(6) }
        let code = http.withCString { u -> CURLcode in
            _ = cloudlet_curl_set_pointer(h, CURLOPT_URL, u)
            _ = cloudlet_curl_set_long(h, CURLOPT_CONNECT_ONLY, 1)
            _ = cloudlet_curl_set_long(h, CURLOPT_NOSIGNAL, 1)
            _ = cloudlet_curl_set_long(h, CURLOPT_CONNECTTIMEOUT_MS, Int(timeout * 1000))
            if let ca = caFile { _ = ca.withCString { cloudlet_curl_set_pointer(h, CURLOPT_CAINFO, $0) } }
            return curl_easy_perform(h)
        }
        guard code == CURLE_OK else {
            curl_easy_cleanup(h)
            let what = String(cString: curl_easy_strerror(code))
            let stage: TransportFailure.Stage =
                code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CONNECT_ERROR ? .tls : .connecting
            throw TransportFailure(stage, "websocket \(CurlTransport.redacted(url)): \(what)")
        }
        do { try handshake(url: http, timeout: timeout) } catch {
            curl_easy_cleanup(h)
            throw error
        }
    }

    deinit {
        if open { try? send(opcode: 8, payload: [3, 232]) }  // 1000, normal closure
        curl_easy_cleanup(handle)
    }

    private func handshake(url: String, timeout: Double) throws {
        var key = [UInt8](repeating: 0, count: 16)
        _ = RAND_bytes(&key, 16)
        let keyText = Base64.encode(key)
        let afterScheme = url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        let host = afterScheme.count > 2 ? String(afterScheme[2]) : "localhost"
        let path = afterScheme.count > 3 ? "/" + afterScheme[3] : "/"
        let request =
            "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: \(keyText)\r\nSec-WebSocket-Version: 13\r\n\r\n"
        try write(Array(request.utf8))
        let deadline = Monotonic.now + timeout
        var end: Int?
        while end == nil {
            guard try fill(until: deadline) else { throw TransportFailure(.exchanging, "websocket upgrade: no answer") }
            end = buffer.firstRange(of: [13, 10, 13, 10])?.upperBound
        }
        let head = String(decoding: buffer[..<end!], as: UTF8.self)
        buffer.removeFirst(end!)
        let lines = head.split(separator: "\r\n")
        guard let status = lines.first, status.split(separator: " ").dropFirst().first == "101" else {
            throw TransportFailure(.exchanging, "websocket upgrade refused: \(lines.first ?? "")")
        }
        // Sec-WebSocket-Accept = base64(SHA-1(key + the RFC's GUID)).
        var digest = [UInt8](repeating: 0, count: 20)
        let input = Array((keyText + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
        _ = SHA1(input, input.count, &digest)
        let accept = lines.first { $0.lowercased().hasPrefix("sec-websocket-accept:") }
            .map { $0.dropFirst("sec-websocket-accept:".count).trimmingHTTPWhitespace() }
        guard accept == Base64.encode(digest) else {
            throw TransportFailure(.exchanging, "websocket upgrade: Sec-WebSocket-Accept does not match the key")
        }
    }

    /// The next text or binary message, nil if none arrived within `timeout` seconds. - Throws:
    /// ``TransportFailure`` when the connection closed or broke.
    func receive(timeout: Double) throws -> [UInt8]? {
        let deadline = Monotonic.now + timeout
        var message: [UInt8] = []
        while true {
            guard let (fin, opcode, payload) = try frame(until: deadline) else {
                if message.isEmpty { return nil }
                continue  // the rest of a fragmented message is on its way
            }
            switch opcode {
            case 0, 1, 2:
                message += payload
                if fin { return message }
            case 8:
                open = false
                throw TransportFailure(.exchanging, "the server closed the notification websocket")
            case 9: try send(opcode: 10, payload: payload)
            default: break  // pong, reserved
            }
        }
    }

    /// One frame: (FIN, opcode, payload), nil if it did not arrive before `deadline`.
    private func frame(until deadline: Double) throws -> (Bool, UInt8, [UInt8])? {
        while true {
            if buffer.count >= 2 {
                let b0 = buffer[0], b1 = buffer[1]
                var length = Int(b1 & 0x7f)
                var offset = 2
                if length == 126 {
                    guard buffer.count >= 4 else { if try !fill(until: deadline) { return nil }; continue }
                    length = Int(buffer[2]) << 8 | Int(buffer[3])
                    offset = 4
                } else if length == 127 {
                    guard buffer.count >= 10 else { if try !fill(until: deadline) { return nil }; continue }
                    length = buffer[2..<10].reduce(0) { $0 << 8 | Int($1) }
                    offset = 10
                }
                let masked = b1 & 0x80 != 0
                let total = offset + (masked ? 4 : 0) + length
                if buffer.count >= total {
                    var payload = Array(buffer[(total - length)..<total])
                    if masked {
                        let mask = Array(buffer[offset..<offset + 4])
                        for i in payload.indices { payload[i] ^= mask[i & 3] }
                    }
                    buffer.removeFirst(total)
                    return (b0 & 0x80 != 0, b0 & 0x0f, payload)
                }
            }
            if try !fill(until: deadline) { return nil }
        }
    }

    /// Reads what the connection has into `buffer`, waiting up to `deadline`; false on timeout.
    private func fill(until deadline: Double) throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var got = 0
            let code = curl_easy_recv(handle, &chunk, chunk.count, &got)
            if code == CURLE_OK {
                guard got > 0 else {
                    open = false
                    throw TransportFailure(.exchanging, "the notification websocket was closed")
                }
                buffer += chunk[..<got]
                return true
            }
            guard code == CURLE_AGAIN else {
                open = false
                throw TransportFailure(.exchanging, "notification websocket: \(String(cString: curl_easy_strerror(code)))")
            }
            let left = deadline - Monotonic.now
            if left <= 0 { return false }
            try wait(readable: true, seconds: min(left, 0.25))
        }
    }

    /// Sends one frame, masked as a client must.
    private func send(opcode: UInt8, payload: [UInt8]) throws {
        var frame: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
        }
        var mask = [UInt8](repeating: 0, count: 4)
        _ = RAND_bytes(&mask, 4)
        frame += mask
        frame += payload.enumerated().map { $1 ^ mask[$0 & 3] }
        try write(frame)
    }

    private func write(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            var n = 0
            let code = bytes[sent...].withUnsafeBytes { curl_easy_send(handle, $0.baseAddress, $0.count, &n) }
            if code == CURLE_AGAIN {
                try wait(readable: false, seconds: 1)
                continue
            }
            guard code == CURLE_OK else {
                open = false
                throw TransportFailure(.exchanging, "notification websocket: \(String(cString: curl_easy_strerror(code)))")
            }
            sent += n
        }
    }

    /// Waits until the socket is readable (or writable), or `seconds` pass.
    private func wait(readable: Bool, seconds: Double) throws {
        var socket: curl_socket_t = -1
        _ = cloudlet_curl_get_socket(handle, &socket)
        guard socket >= 0 else { throw TransportFailure(.exchanging, "notification websocket has no socket") }
        var p = pollfd(fd: socket, events: Int16(readable ? POLLIN : POLLOUT), revents: 0)
        _ = poll(&p, 1, Int32(max(1, seconds * 1000)))
    }
}

/// Seconds on the monotonic clock.
enum Monotonic {
    static var now: Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
}
