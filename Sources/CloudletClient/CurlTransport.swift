import CCurl
import CloudletConcurrency
import CloudletCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// HTTP over libcurl (Debian's libcurl4-openssl-dev): HTTP/1.1 keep-alive, HTTP/2 over TLS where the server offers
/// it, and TLS that trusts a CA file of the caller's choosing. FoundationNetworking's URLSession, the alternative in
/// the toolchain, cannot: on Linux it ignores `SSL_CERT_FILE` and never asks a delegate about server trust, so a
/// server with a private CA is unreachable (`reference/linux-swift-notes.md`).
///
/// Each request runs `curl_easy_perform` on a thread outside Swift's cooperative pool (``BlockingThreads``)
/// with an easy handle from a small pool; a handle keeps its connections between requests, so a client reuses
/// its connections. Cancelling the calling task aborts the transfer (libcurl's progress callback) and throws
/// `CancellationError`.
public final class CurlTransport: HTTPTransport {
    public struct Options: Sendable {
        /// PEM file of the certificate authorities to trust (nil: the system's).
        public var caFile: String?
        /// Whole-request timeout, seconds (long-polls add their own wait to it).
        public var timeout: Double = 120
        public var connectTimeout: Double = 10
        /// Easy handles (each with its connections) kept between requests.
        public var maxIdleHandles: Int = 16

        public init(caFile: String? = nil) { self.caFile = caFile }
    }

    public let options: Options
    private let idle = Mutex<[EasyHandle]>([])

    /// `curl_global_init`, once per process (Swift runs a global's initializer once, thread-safely).
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    public init(options: Options = Options()) {
        self.options = options
    }

    deinit {
        for h in idle.withLock({ $0 }) { curl_easy_cleanup(h.pointer) }
    }

    public func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        try Task.checkCancellation()
        let exchange = Exchange(request)
        return try await withTaskCancellationHandler {
            try await BlockingThreads.shared.run { try self.perform(exchange) }
        } onCancel: {
            exchange.cancelled.store(true, ordering: .relaxed)
        }
    }

    /// ``send(_:)`` on the calling thread, which it blocks until the answer (or the timeout): for a caller already on
    /// a thread that may block (a ``BlockingThreads`` job), which then saves two thread switches per request.
    public func sendBlocking(_ request: HTTPClientRequest) throws -> HTTPClientResponse {
        ThreadBridge.checkMayBlock("an HTTP request to \(Self.redacted(request.url))")
        return try perform(Exchange(request))
    }

    // MARK: - The blocking part

    /// A `CURL *`, used by one request at a time.
    private struct EasyHandle: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
    }

    /// What libcurl's callbacks write into, reached through their context pointer. `@unchecked Sendable`: the
    /// buffers are touched only by the thread running the transfer; `cancelled` is atomic.
    private final class Exchange: @unchecked Sendable {
        let request: HTTPClientRequest
        let cancelled = Atomic<Bool>(false)
        var body: [UInt8] = []
        var headerLines: [String] = []
        /// The status line's code, seen by the header callback (a 200's body goes to `sink` when there is one).
        var status = 0
        var sink: UnsafeMutablePointer<FILE>?
        var sinkFailed = false

        /// The body file, open for reading, and its size.
        var upload: (file: UnsafeMutablePointer<FILE>, size: curl_off_t)?

        init(_ request: HTTPClientRequest) { self.request = request }

        func openFiles() throws {
            if let path = request.bodyFile {
                guard let f = fopen(path, "rb") else {
                    throw CloudletError(.invalidArguments, "cannot read \(path): \(String(cString: strerror(errno)))")
                }
                var st = stat()
                fstat(fileno(f), &st)
                upload = (f, curl_off_t(st.st_size))
            }
            if let path = request.responseFile {
                guard let f = fopen(path, "wb") else {
                    closeFiles()
                    throw CloudletError(.io, "cannot write \(path): \(String(cString: strerror(errno)))")
                }
                sink = f
            }
        }

        func closeFiles() {
            if let u = upload { fclose(u.file) }
            upload = nil
            if let s = sink { fclose(s) }
            sink = nil
        }
    }

    private func checkout() throws -> EasyHandle {
        guard Self.initialized else { throw TransportFailure(.connecting, "libcurl failed to initialize") }
        if let h = idle.withLock({ $0.popLast() }) { return h }
        guard let p = curl_easy_init() else { throw TransportFailure(.connecting, "curl_easy_init failed") }
        return EasyHandle(pointer: p)
    }

    private func checkin(_ h: EasyHandle) {
        let kept = idle.withLock { list -> Bool in
            guard list.count < options.maxIdleHandles else { return false }
            list.append(h)
            return true
        }
        if !kept { curl_easy_cleanup(h.pointer) }
    }

    private func perform(_ exchange: Exchange) throws -> HTTPClientResponse {
        let handle = try checkout()
        defer { checkin(handle) }
        let h = handle.pointer
        // Options go back to their defaults; the handle's connections, DNS and TLS session caches stay.
        curl_easy_reset(h)
        let request = exchange.request

        var headers: UnsafeMutablePointer<curl_slist>? = nil
        defer { curl_slist_free_all(headers) }
        for (name, value) in request.headers { headers = curl_slist_append(headers, "\(name): \(value)") }
        // No `Expect: 100-continue` round trip before a body.
        headers = curl_slist_append(headers, "Expect:")

        try exchange.openFiles()
        defer { exchange.closeFiles() }

        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let context = Unmanaged.passUnretained(exchange).toOpaque()
        let code: CURLcode = request.url.withCString { url in
            errorBuffer.withUnsafeMutableBufferPointer { errors in
                _ = cloudlet_curl_set_pointer(h, CURLOPT_URL, url)
                _ = cloudlet_curl_set_pointer(h, CURLOPT_ERRORBUFFER, errors.baseAddress)
                _ = cloudlet_curl_set_pointer(h, CURLOPT_HTTPHEADER, headers)
                _ = cloudlet_curl_set_long(h, CURLOPT_NOSIGNAL, 1)
                _ = cloudlet_curl_set_long(h, CURLOPT_TIMEOUT_MS, Int(options.timeout * 1000))
                _ = cloudlet_curl_set_long(h, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout * 1000))
                _ = cloudlet_curl_set_long(h, CURLOPT_TCP_NODELAY, 1)
                _ = cloudlet_curl_set_long(h, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
                _ = cloudlet_curl_set_data_callback(h, CURLOPT_WRITEFUNCTION) { data, size, count, context in
                    let n = size * count
                    guard let data, let context, n > 0 else { return n }
                    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
                    if let sink = exchange.sink, exchange.status == 200 {
                        guard fwrite(data, 1, n, sink) == n else {
                            exchange.sinkFailed = true
                            return 0  // aborts the transfer
                        }
                        return n
                    }
                    data.withMemoryRebound(to: UInt8.self, capacity: n) {
                        exchange.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: n))
                    }
                    return n
                }
                _ = cloudlet_curl_set_pointer(h, CURLOPT_WRITEDATA, context)
                _ = cloudlet_curl_set_data_callback(h, CURLOPT_HEADERFUNCTION) { data, size, count, context in
                    let n = size * count
                    guard let data, let context, n > 0 else { return n }
                    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
                    let line = data.withMemoryRebound(to: UInt8.self, capacity: n) {
                        String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self)
                    }
                    // A new status line (after `100 Continue` or a redirect) starts the headers over.
                    if line.hasPrefix("HTTP/") {
                        exchange.headerLines.removeAll()
                        exchange.status = line.utf8.split(separator: UInt8(ascii: " ")).dropFirst().first.flatMap { Int(Substring($0)) } ?? 0
                    } else {
                        exchange.headerLines.append(line)
                    }
                    return n
                }
                _ = cloudlet_curl_set_pointer(h, CURLOPT_HEADERDATA, context)
                _ = cloudlet_curl_set_long(h, CURLOPT_NOPROGRESS, 0)
                _ = cloudlet_curl_set_progress_callback(h) { context, _, _, _, _ in
                    guard let context else { return 0 }
                    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
                    return exchange.cancelled.load(ordering: .relaxed) ? 1 : 0
                }
                _ = cloudlet_curl_set_pointer(h, CURLOPT_XFERINFODATA, context)
                if let ca = options.caFile { _ = ca.withCString { cloudlet_curl_set_pointer(h, CURLOPT_CAINFO, $0) } }

                switch request.method {
                case "GET": _ = cloudlet_curl_set_long(h, CURLOPT_HTTPGET, 1)
                case "POST": _ = cloudlet_curl_set_long(h, CURLOPT_POST, 1)
                default: _ = request.method.withCString { cloudlet_curl_set_pointer(h, CURLOPT_CUSTOMREQUEST, $0) }
                }
                if let upload = exchange.upload {
                    // libcurl's default read function freads the file.
                    _ = cloudlet_curl_set_pointer(h, CURLOPT_READDATA, upload.file)
                    _ = cloudlet_curl_set_offset(h, CURLOPT_POSTFIELDSIZE_LARGE, upload.size)
                    return withExtendedLifetime(exchange) { curl_easy_perform(h) }
                }
                let body = request.body ?? (request.method == "POST" ? [] : nil)
                guard let body else { return withExtendedLifetime(exchange) { curl_easy_perform(h) } }
                return body.withUnsafeBytes { bytes in
                    // libcurl reads the body from our buffer (no copy); it stays put until perform returns.
                    _ = cloudlet_curl_set_offset(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                    _ = cloudlet_curl_set_pointer(h, CURLOPT_POSTFIELDS, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
                    return withExtendedLifetime(exchange) { curl_easy_perform(h) }
                }
            }
        }

        if exchange.sinkFailed { throw TransportFailure(.exchanging, "cannot write \(request.responseFile ?? ""): errno \(errno)") }
        guard code == CURLE_OK else {
            if exchange.cancelled.load(ordering: .relaxed) { throw CancellationError() }
            let detail = errorBuffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            let what = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            let message = "\(request.method) \(Self.redacted(request.url)): \(what)"
            switch code {
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
                throw TransportFailure(.connecting, message)
            case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM:
                throw TransportFailure(.tls, message)
            default:
                throw TransportFailure(.exchanging, message)
            }
        }
        var status = 0
        _ = cloudlet_curl_get_long(h, CURLINFO_RESPONSE_CODE, &status)
        return HTTPClientResponse(status: status, headers: Self.parse(exchange.headerLines), body: exchange.body)
    }

    private static func parse(_ lines: [String]) -> [(name: String, value: String)] {
        lines.compactMap { line in
            let bytes = line.utf8
            guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return nil }
            let name = String(Substring(bytes[..<colon]))
            let value = Substring(bytes[bytes.index(after: colon)...]).trimmingHTTPWhitespace()
            return (name, value)
        }
    }

    /// The URL without its query (which carries tokens), for error messages and logs.
    static func redacted(_ url: String) -> String {
        guard let q = url.firstIndex(of: "?") else { return url }
        return String(url[..<q]) + "?…"
    }
}
