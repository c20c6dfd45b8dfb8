import CCivetweb
import COpenSSL
import CivetStack
import Foundation
import Synchronization

/// An HTTP(S) listener on civetweb: civetweb's worker threads read each request, call ``handler`` and write the
/// response it returns, with keep-alive and `TCP_NODELAY`.
///
/// Handlers run on civetweb's own threads (one per connection being served), never on Swift's cooperative pool,
/// so they may block; see ``ThreadBridge/wait(_:)`` for calling async code from them.
final class HTTPListener: Sendable {
    /// Certificate and key files for HTTPS.
    struct TLSFiles: Sendable {
        /// PEM certificate, optionally followed by its chain.
        var certificate: String
        /// PEM private key.
        var key: String
    }

    struct Options: Sendable {
        /// Address to bind: an IPv4 address (civetweb is built without IPv6).
        var host = "127.0.0.1"
        /// 0 picks a free port; see ``HTTPListener/port``.
        var port = 8080
        var tls: TLSFiles?
        /// Worker threads: the most connections served at once (a keep-alive connection holds one).
        var threads = 64
        /// Larger bodies are not kept: the handler sees ``HTTPRequest/oversizedBodyLength``.
        var maxBodySize = 16 << 20
        /// Requests under this path have their bodies read by the handler (``HTTPRequest/bodyStream``), whatever
        /// their size: asset uploads.
        var streamedPathPrefix: String?
        var requestTimeoutMs = 30_000
        var keepAliveTimeoutMs = 5_000
    }

    let options: Options
    let handler: @Sendable (HTTPRequest) -> HTTPResponse
    /// Registers more handlers (websockets) on the started civetweb context.
    let onStart: (@Sendable (OpaquePointer) -> Void)?
    /// Where civetweb's own messages (TLS handshake failures, socket errors) go.
    let log: @Sendable (String) -> Void
    private let state = Mutex(State())

    /// civetweb's `mg_context*`. `@unchecked Sendable`: civetweb's context functions are thread-safe, and `state`'s
    /// lock makes sure only one thread takes it out to stop it.
    private struct Context: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private struct State: ~Copyable {
        var context: Context?
        var port = 0
        var retained: Unmanaged<HTTPListener>?
        var tlsError: String?
        var stopping = false
    }

    init(
        options: Options, log: @escaping @Sendable (String) -> Void,
        onStart: (@Sendable (OpaquePointer) -> Void)? = nil,
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) {
        self.options = options
        self.log = log
        self.onStart = onStart
        self.handler = handler
    }

    /// The port bound (the real one when ``Options/port`` was 0); 0 before ``start()``.
    var port: Int { state.withLock { $0.port } }

    /// The stack size of civetweb's threads, which run the handlers (Debian's civetweb alone would give 100 KiB).
    static var workerStackSize: Int { Int(civet_min_stack_size()) }

    /// The stack size of the calling thread.
    static var currentThreadStackSize: Int { Int(civet_current_thread_stack_size()) }

    /// Binds and starts serving. - Throws: ``ServerSetupError`` naming what failed (port in use, bad certificate).
    func start() throws {
        if options.tls != nil, case .failure(let e) = CivetLibrary.tls { throw e }
        _ = CivetLibrary.tls
        let me = Unmanaged.passRetained(self)
        let listening = "\(options.host):\(options.port)\(options.tls != nil ? "s" : "")"
        var config = [
            "listening_ports", listening,
            "num_threads", String(options.threads),
            "enable_keep_alive", "yes",
            "keep_alive_timeout_ms", String(options.keepAliveTimeoutMs),
            "request_timeout_ms", String(options.requestTimeoutMs),
            "tcp_nodelay", "1",
            "listen_backlog", "1024",
            "connection_queue", String(max(options.threads, 64)),
        ]
        if options.tls != nil { config += ["ssl_protocol_version", "4"] }  // TLS 1.2 and later
        let cStrings = config.map { strdup($0) } + [nil]
        defer { for p in cStrings { free(p) } }

        var callbacks = mg_callbacks()
        callbacks.log_message = logTrampoline
        if options.tls != nil { callbacks.init_ssl = initSSLTrampoline }

        var errorCode: UInt32 = 0
        var errorText = [CChar](repeating: 0, count: 512)
        let context: OpaquePointer? = cStrings.withUnsafeBufferPointer { options in
            withUnsafePointer(to: &callbacks) { cb in
                withUnsafeMutablePointer(to: &errorCode) { code in
                    errorText.withUnsafeMutableBufferPointer { text in
                        var initData = mg_init_data(
                            callbacks: cb, user_data: me.toOpaque(),
                            configuration_options: UnsafeMutableRawPointer(mutating: options.baseAddress!)
                                .assumingMemoryBound(to: UnsafePointer<CChar>?.self))
                        var errorData = mg_error_data(code: code, text: text.baseAddress, text_buffer_size: text.count)
                        return mg_start2(&initData, &errorData)
                    }
                }
            }
        }
        guard let context else {
            me.release()
            let civet = errorText.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            let tls = state.withLock { $0.tlsError }
            throw ServerSetupError("cannot listen on \(listening): \(tls ?? civet) (civetweb error \(errorCode))")
        }
        var ports = [mg_server_port](repeating: mg_server_port(), count: 4)
        let n = mg_get_server_ports(context, Int32(ports.count), &ports)
        let bound = n > 0 ? Int(ports[0].port) : options.port
        mg_set_request_handler(context, "/", requestTrampoline, me.toOpaque())
        onStart?(context)
        state.withLock {
            $0.context = Context(pointer: context)
            $0.port = bound
            $0.retained = me
        }
    }

    /// Stops accepting, lets requests being served finish, and returns when every worker thread has exited:
    /// within milliseconds, except that a worker waiting on an idle keep-alive connection notices only at the end
    /// of civetweb's 2 s poll quantum (civetweb offers no way to reach that socket). Idempotent.
    func stop() {
        let (context, retained, port) = state.withLock { s -> (Context?, Unmanaged<HTTPListener>?, Int) in
            defer {
                s.context = nil
                s.retained = nil
                s.stopping = true
            }
            return (s.context, s.retained, s.port)
        }
        guard let context else { return }
        // civetweb's master thread notices the stop flag only when its poll() returns: every 2 s, or when a
        // connection arrives. Poke it with connections until mg_stop returns, so stopping takes milliseconds.
        let done = StopFlag()
        let host = options.host == "0.0.0.0" ? "127.0.0.1" : options.host
        let waker = Thread {
            while !done.isSet {
                Self.poke(host: host, port: port)
                usleep(20_000)
            }
        }
        waker.start()
        mg_stop(context.pointer)
        done.set()
        retained?.release()
    }

    /// Opens and closes a TCP connection to wake the listener.
    private static func poke(host: String, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else { return }
        _ = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    // MARK: - Called on civetweb's threads

    fileprivate func serve(_ conn: OpaquePointer) -> Int32 {
        let received = ContinuousClock.now
        guard let info = mg_get_request_info(conn) else { return 500 }
        let ri = info.pointee
        let declared = ri.content_length
        var request = HTTPRequest(
            method: ri.request_method.map { String(cString: $0) } ?? "GET",
            path: (ri.local_uri ?? ri.request_uri).map { String(cString: $0) } ?? "/",
            query: ri.query_string.map { String(cString: $0) } ?? "",
            host: mg_get_header(conn, "Host").map { String(cString: $0) },
            serverKeyID: mg_get_header(conn, "X-Apple-CloudKit-Request-KeyID").map { String(cString: $0) },
            remoteAddress: withUnsafeBytes(of: info.pointee.remote_addr) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            },
            isTLS: ri.is_ssl != 0, received: received)
        request.range = mg_get_header(conn, "Range").map { String(cString: $0) }
        request.authorization = mg_get_header(conn, "Authorization").map { String(cString: $0) }
        request.serverKeyDate = mg_get_header(conn, "X-Apple-CloudKit-Request-ISO8601Date").map { String(cString: $0) }
        request.serverKeySignature = mg_get_header(conn, "X-Apple-CloudKit-Request-SignatureV1").map { String(cString: $0) }
        request.cookie = mg_get_header(conn, "Cookie").map { String(cString: $0) }
        request.csrfToken = mg_get_header(conn, "X-Cloudlet-CSRF").map { String(cString: $0) }
        var drained = true
        if let prefix = options.streamedPathPrefix, request.path.hasPrefix(prefix) {
            let chunked = declared < 0 && mg_get_header(conn, "Transfer-Encoding") != nil
            let stream = HTTPBodyStream(connection: conn, declaredLength: chunked ? nil : max(declared, 0))
            request.bodyStream = stream
            var response = handler(request)
            if !stream.finished { response.closeConnection = true }
            return write(response, to: conn)
        }
        if declared > Int64(options.maxBodySize) {
            request.oversizedBodyLength = declared
            // Read and drop a moderately oversized body so the client sees our 413 rather than a reset
            // connection; a huge one is not worth reading.
            drained = declared <= 4 * Int64(options.maxBodySize) && discard(conn, Int(declared))
        } else {
            switch readBody(conn, declared: declared) {
            case .success(let body): request.body = body
            case .failure(let tooLarge):
                request.oversizedBodyLength = tooLarge.length
                drained = false
            }
        }
        var response = handler(request)
        if !drained { response.closeConnection = true }
        return write(response, to: conn)
    }

    private struct BodyTooLarge: Error { var length: Int64 }

    /// Reads the body: straight into an array of the declared length, or (chunked) in pieces up to the limit.
    private func readBody(_ conn: OpaquePointer, declared: Int64) -> Result<[UInt8], BodyTooLarge> {
        if declared >= 0 {
            var body = [UInt8](repeating: 0, count: Int(declared))
            var got = 0
            while got < body.count {
                let n = body.withUnsafeMutableBytes { mg_read(conn, $0.baseAddress! + got, $0.count - got) }
                if n <= 0 { break }
                got += Int(n)
            }
            body.removeLast(body.count - got)  // the client sent less than it announced
            return .success(body)
        }
        guard mg_get_header(conn, "Transfer-Encoding") != nil else { return .success([]) }  // no body at all
        var body: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { mg_read(conn, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            if body.count + Int(n) > options.maxBodySize { return .failure(BodyTooLarge(length: Int64(body.count) + Int64(n))) }
            body.append(contentsOf: chunk[0..<Int(n)])
        }
        return .success(body)
    }

    private func discard(_ conn: OpaquePointer, _ length: Int) -> Bool {
        var left = length
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while left > 0 {
            let n = chunk.withUnsafeMutableBytes { mg_read(conn, $0.baseAddress, min($0.count, left)) }
            if n <= 0 { return false }
            left -= Int(n)
        }
        return true
    }

    private func write(_ response: HTTPResponse, to conn: OpaquePointer) -> Int32 {
        if response.closeConnection { mg_disable_keep_alive(conn) }
        mg_response_header_start(conn, Int32(response.status))
        mg_response_header_add(conn, "Content-Type", response.contentType, -1)
        let length = response.stream?.length ?? Int64(response.body.count)
        mg_response_header_add(conn, "Content-Length", String(length), -1)
        for (name, value) in response.headers { mg_response_header_add(conn, name, value, -1) }
        mg_response_header_send(conn)
        if let stream = response.stream {
            stream.write { bytes in bytes.isEmpty || mg_write(conn, bytes.baseAddress, bytes.count) > 0 }
        } else if !response.body.isEmpty {
            _ = response.body.withUnsafeBytes { mg_write(conn, $0.baseAddress, $0.count) }
        }
        return Int32(response.status)
    }

    fileprivate func civetMessage(_ message: String) {
        if state.withLock({ $0.stopping }) { return }
        log(message.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Loads the certificate and key into civetweb's `SSL_CTX`; 1 on success, -1 (and a reason kept for
    /// ``start()``) on failure.
    fileprivate func configureTLS(_ ctx: OpaquePointer) -> Int32 {
        guard let files = options.tls else { return 0 }
        ERR_clear_error()
        if SSL_CTX_use_certificate_chain_file(ctx, files.certificate) != 1 {
            return tlsFailure("cannot load TLS certificate \(files.certificate)")
        }
        if SSL_CTX_use_PrivateKey_file(ctx, files.key, SSL_FILETYPE_PEM) != 1 {
            return tlsFailure("cannot load TLS private key \(files.key)")
        }
        if SSL_CTX_check_private_key(ctx) != 1 {
            return tlsFailure("TLS private key \(files.key) does not match certificate \(files.certificate)")
        }
        return 1
    }

    private func tlsFailure(_ what: String) -> Int32 {
        var reasons: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buf, buf.count)
            reasons.append(buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        let message = reasons.isEmpty ? what : "\(what): \(reasons.joined(separator: "; "))"
        state.withLock { $0.tlsError = message }
        return -1
    }
}

/// A flag set once, shared with the waker thread.
private final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

// C entry points: non-capturing closures; Swift state comes through `cbdata` / `user_data`.

private let requestTrampoline: mg_request_handler = { conn, cbdata in
    guard let conn, let cbdata else { return 500 }
    return Unmanaged<HTTPListener>.fromOpaque(cbdata).takeUnretainedValue().serve(conn)
}

private let logTrampoline: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> Int32 = { conn, message in
    guard let message else { return 1 }
    if let conn, let ctx = mg_get_context(conn), let user = mg_get_user_data(ctx) {
        Unmanaged<HTTPListener>.fromOpaque(user).takeUnretainedValue().civetMessage(String(cString: message))
    }
    return 1
}

private let initSSLTrampoline: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32 = {
    sslContext, userData in
    guard let sslContext, let userData else { return -1 }
    return Unmanaged<HTTPListener>.fromOpaque(userData).takeUnretainedValue().configureTLS(OpaquePointer(sslContext))
}
