import CEventHTTP
import COpenSSL
import Foundation
import Synchronization

/// An HTTP(S) listener on the event-driven front end (`Sources/CEventHTTP`, libuv + http-parser + OpenSSL): one
/// loop thread holds every connection, so an idle keep-alive, a waiting long poll or an open websocket holds no
/// thread; complete requests run ``handler`` on a bounded pool of ``Options/threads`` worker threads.
///
/// Handlers may block (see ``ThreadBridge/wait(_:)`` for calling async code from them); a handler that has to wait
/// for something answers with ``HTTPResponse/later(_:)`` instead, which frees its worker. Malformed requests, slow
/// clients and timeouts are answered by the loop with a CloudKit-shaped JSON error; see docs/front-end.md.
final class HTTPListener: Sendable {
    /// Certificate and key files for HTTPS.
    struct TLSFiles: Sendable {
        /// PEM certificate, optionally followed by its chain.
        var certificate: String
        /// PEM private key.
        var key: String
    }

    struct Options: Sendable {
        /// Address to bind: IPv4 or IPv6.
        var host = "127.0.0.1"
        /// 0 picks a free port; see ``HTTPListener/port``.
        var port = 8080
        var tls: TLSFiles?
        /// Worker threads: the most requests handled at once. Connections are not limited by it.
        var threads = 64
        /// Larger bodies are not kept: the handler sees ``HTTPRequest/oversizedBodyLength``.
        var maxBodySize = 16 << 20
        /// Requests under this path have their bodies read by the handler (``HTTPRequest/bodyStream``), whatever
        /// their size: asset uploads.
        var streamedPathPrefix: String?
        /// From a request's first byte (or a TLS handshake's) to the end of its headers; then 408.
        var headerTimeoutMs = 10_000
        /// The longest pause between two pieces of a request body; then 408.
        var bodyTimeoutMs = 30_000
        /// How long a keep-alive connection may wait for its next request, and a stalled write for the client
        /// to read.
        var keepAliveTimeoutMs = 5_000
        /// Open connections from one address; more are answered 503 and closed. 0: no cap.
        var maxConnectionsPerPeer = 1_024
        /// Header lines in one request, and bytes of its request line and headers; more are answered 431.
        var maxHeaderCount = 100
        var maxHeaderBytes = 32 << 10
        /// Bytes queued for one connection: a streamed download waits above it, a websocket client that does not
        /// read that much is closed.
        var outputBufferBytes = 1 << 20
        /// Connections the front end's 100 ms timeout sweep looks at per tick, round robin: with more open, each
        /// one's timeouts are checked every ceil(N / budget) ticks (1 s at 10,240 connections).
        var sweepBudget = 1_024
    }

    let options: Options
    let handler: @Sendable (HTTPRequest) -> HTTPResponse
    /// Websocket paths (``WebSocketEndpoint``): a handshake on one of them goes to its endpoint.
    let webSockets: [WebSocketEndpoint]
    /// Where the front end's own messages (TLS handshake failures, accept errors) go.
    let log: @Sendable (String) -> Void
    private let state = Mutex(State())

    /// The C server and TLS context. `@unchecked Sendable`: used by one thread at a time under `state`'s lock
    /// (start and stop); the C server is thread-safe otherwise.
    private struct Running: @unchecked Sendable {
        let server: OpaquePointer
        let tls: OpaquePointer?
    }

    private struct State: ~Copyable {
        var running: Running?
        var port = 0
        var retained: Unmanaged<HTTPListener>?
    }

    init(
        options: Options, log: @escaping @Sendable (String) -> Void, webSockets: [WebSocketEndpoint] = [],
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) {
        self.options = options
        self.log = log
        self.webSockets = webSockets
        self.handler = handler
    }

    /// The port bound (the real one when ``Options/port`` was 0); 0 before ``start()``.
    var port: Int { state.withLock { $0.port } }

    /// The stack size of the worker threads, which run the handlers.
    static let workerStackSize = 4 << 20

    /// The stack size of the calling thread.
    static var currentThreadStackSize: Int { Int(eh_current_thread_stack_size()) }

    /// Binds and starts serving. - Throws: ``ServerSetupError`` naming what failed (port in use, bad certificate).
    func start() throws {
        let tls = try options.tls.map { try TLSContext.make($0) }
        let me = Unmanaged.passRetained(self)
        var server: OpaquePointer?
        var error = [CChar](repeating: 0, count: 256)
        let status = options.host.withCString { host in
            withOptionalCString(options.streamedPathPrefix) { prefix in
                var config = eh_config()
                config.host = host
                config.port = Int32(options.port)
                config.workers = Int32(options.threads)
                config.worker_stack = Self.workerStackSize
                config.max_body = options.maxBodySize
                config.streamed_prefix = prefix
                config.header_timeout_ms = Int32(options.headerTimeoutMs)
                config.body_timeout_ms = Int32(options.bodyTimeoutMs)
                config.idle_timeout_ms = Int32(options.keepAliveTimeoutMs)
                config.max_connections_per_peer = Int32(options.maxConnectionsPerPeer)
                config.max_header_count = options.maxHeaderCount
                config.max_header_bytes = options.maxHeaderBytes
                config.output_cap = options.outputBufferBytes
                config.sweep_budget = Int32(options.sweepBudget)
                config.tls_context = tls.map { UnsafeMutableRawPointer($0) }
                config.on_request = requestTrampoline
                config.on_log = logTrampoline
                config.user = me.toOpaque()
                return error.withUnsafeMutableBufferPointer { eh_server_start(&config, &server, $0.baseAddress, $0.count) }
            }
        }
        guard status == 0, let server else {
            me.release()
            if let tls { SSL_CTX_free(tls) }
            let reason = error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw ServerSetupError("cannot listen on \(options.host):\(options.port): \(reason)")
        }
        state.withLock {
            $0.running = Running(server: server, tls: tls)
            $0.port = Int(eh_server_port(server))
            $0.retained = me
        }
    }

    /// Stops accepting, lets the requests being handled finish (their answers are sent), closes every connection
    /// (keep-alives, long polls, websockets) and returns. Idempotent.
    func stop() {
        let (running, retained) = state.withLock { s -> (Running?, Unmanaged<HTTPListener>?) in
            defer {
                s.running = nil
                s.retained = nil
            }
            return (s.running, s.retained)
        }
        guard let running else { return }
        eh_server_stop(running.server)
        if let tls = running.tls { SSL_CTX_free(tls) }
        retained?.release()
    }

    // MARK: - Called on worker threads

    fileprivate func serve(_ raw: UnsafeMutablePointer<eh_request>) {
        let r = raw.pointee
        guard let conn = r.conn else { return }
        var request = HTTPRequest.from(r)
        if r.upgrade != 0, let endpoint = webSockets.first(where: { $0.path == request.path }) {
            endpoint.handshake(request, connection: conn, listener: self)
            return
        }
        var drained = r.oversized == 0
        if r.streamed != 0 {
            let stream = HTTPBodyStream(request: raw, declaredLength: r.chunked != 0 ? nil : max(r.declared_length, 0))
            request.bodyStream = stream
            var response = handler(request)
            if !stream.finished { response.closeConnection = true }
            write(response, to: conn, request: request, keepAlive: r.keep_alive != 0)
            return
        }
        if r.oversized != 0 { request.oversizedBodyLength = r.oversized_length }
        var response = handler(request)
        if r.upgrade != 0 { drained = false }
        if !drained { response.closeConnection = true }
        write(response, to: conn, request: request, keepAlive: r.keep_alive != 0)
    }

    /// Sends `response` (status, headers and body in one write where the body is in memory); an answer given
    /// ``HTTPResponse/later(_:)`` is awaited on a ``ConnectionTask``, holding the connection but no thread.
    func write(_ response: HTTPResponse, to conn: OpaquePointer, request: HTTPRequest, keepAlive: Bool) {
        if let later = response.later {
            // Cancelled when the client goes: a long poll then answers at once instead of at its timeout.
            let held = HeldConnection(conn)
            ConnectionTask.start(for: conn, later) { answer in
                var answer = answer
                answer.closeConnection = answer.closeConnection || response.closeConnection
                self.write(answer, to: held.pointer, request: request, keepAlive: keepAlive)
            }
            return
        }
        let close = response.closeConnection || !keepAlive
        var head = "HTTP/1.1 \(response.status) \(Self.reasonPhrase(response.status))\r\n"
        head += "Content-Type: \(response.contentType)\r\n"
        let length = response.file?.length ?? response.stream?.length ?? Int64(response.body.count)
        head += "Content-Length: \(length)\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        if request.isTLS { head += "Strict-Transport-Security: max-age=31536000\r\n" }
        if close { head += "Connection: close\r\n" }
        head += "\r\n"
        let end = Int32(EH_END) | (close ? Int32(EH_CLOSE) : 0)
        let sendBody = request.method != "HEAD"
        if let file = response.file {
            var bytes = Array(head.utf8)
            guard sendBody, file.length > 0 else {
                bytes.withUnsafeBytes { _ = eh_conn_respond(conn, $0.baseAddress, $0.count, end) }
                return
            }
            _ = bytes.withUnsafeBytes { eh_conn_respond(conn, $0.baseAddress, $0.count, 0) }
            bytes = []
            _ = eh_conn_send_file(conn, file.take(), file.offset, file.length, end)
            return
        }
        if let stream = response.stream {
            var bytes = Array(head.utf8)
            _ = bytes.withUnsafeBytes { eh_conn_respond(conn, $0.baseAddress, $0.count, Int32(EH_WAIT)) }
            if sendBody {
                stream.write { piece in
                    piece.isEmpty || eh_conn_respond(conn, piece.baseAddress, piece.count, Int32(EH_WAIT)) == 1
                }
            }
            bytes = []
            _ = eh_conn_respond(conn, nil, 0, end)
            return
        }
        var bytes = Array(head.utf8)
        if sendBody { bytes += response.body }
        _ = bytes.withUnsafeBytes { eh_conn_respond(conn, $0.baseAddress, $0.count, end) }
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 409: "Conflict"
        case 412: "Precondition Failed"
        case 413: "Payload Too Large"
        case 416: "Range Not Satisfiable"
        case 421: "Misdirected Request"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }

    fileprivate func message(_ text: String) { log(text) }
}

/// A connection kept for an answer given later; releases it when the answer is sent. `@unchecked Sendable`: the C
/// connection is reference-counted and its functions are thread-safe (its own lock).
final class HeldConnection: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) {
        self.pointer = pointer
        eh_conn_retain(pointer)
    }

    deinit { eh_conn_release(pointer) }
}

/// The server's `SSL_CTX`: TLS 1.2 and 1.3, forward-secret AEAD suites only (ECDHE with AES-GCM or ChaCha20-Poly1305
/// for 1.2; 1.3's suites are all of that kind), the server's preference.
enum TLSContext {
    static let tls12Ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
        + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

    static func make(_ files: HTTPListener.TLSFiles) throws -> OpaquePointer {
        ERR_clear_error()
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw failure("cannot create a TLS context") }
        var ok = false
        defer { if !ok { SSL_CTX_free(ctx) } }
        // The minimum version and the options are macros Swift cannot import: set in C.
        guard eh_tls_configure(UnsafeMutableRawPointer(ctx), tls12Ciphers) == 1 else {
            throw failure("cannot set the TLS versions and cipher suites")
        }
        guard SSL_CTX_use_certificate_chain_file(ctx, files.certificate) == 1 else {
            throw failure("cannot load TLS certificate \(files.certificate)")
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, files.key, SSL_FILETYPE_PEM) == 1 else {
            throw failure("cannot load TLS private key \(files.key)")
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw failure("TLS private key \(files.key) does not match certificate \(files.certificate)")
        }
        ok = true
        return ctx
    }

    private static func failure(_ what: String) -> ServerSetupError {
        var reasons: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buf, buf.count)
            reasons.append(buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        return ServerSetupError(reasons.isEmpty ? what : "\(what): \(reasons.joined(separator: "; "))")
    }
}

private func withOptionalCString<T>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> T) -> T {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}

// C entry points: non-capturing closures; the listener comes through `user`.

private let requestTrampoline: eh_request_fn = { user, request in
    guard let user, let request else { return }
    Unmanaged<HTTPListener>.fromOpaque(user).takeUnretainedValue().serve(request)
}

private let logTrampoline: eh_log_fn = { user, message in
    guard let user, let message else { return }
    Unmanaged<HTTPListener>.fromOpaque(user).takeUnretainedValue().message(String(cString: message))
}
