/// One HTTP request as the listener read it: method, decoded path, raw query, the headers the server uses, and
/// the body (already bounded by ``HTTPListener/Options/maxBodySize``).
public struct HTTPRequest: Sendable {
    public var method: String
    /// The URL-decoded path, e.g. `/database/1/iCloud.com.example/development/public/records/lookup`.
    public var path: String
    /// The raw query string (after `?`, not decoded), or "".
    public var query: String
    /// The `Host` header, if any.
    public var host: String?
    /// The `X-Apple-CloudKit-Request-KeyID` header (server-to-server auth, which we refuse with a clear error).
    public var serverKeyID: String?
    public var body: [UInt8]
    /// The declared `Content-Length` when the body was over the limit and was not kept; nil otherwise.
    public var oversizedBodyLength: Int64?
    public var remoteAddress: String
    public var isTLS: Bool
    /// When the listener started reading the request (for latency metrics).
    public var received: ContinuousClock.Instant
    /// The `Range` header, if any.
    public var range: String?
    /// The `Authorization` header, if any (`Bearer <admin token>` on admin routes and metrics).
    public var authorization: String?
    /// `X-Apple-CloudKit-Request-ISO8601Date` and `X-Apple-CloudKit-Request-SignatureV1` (server-to-server keys).
    public var serverKeyDate: String?
    public var serverKeySignature: String?
    /// The `Cookie` header, if any (the console's session cookie).
    public var cookie: String?
    /// The `X-Cloudlet-CSRF` header, if any: the console's CSRF token on a state-changing request.
    public var csrfToken: String?
    /// The `Origin` header of a websocket handshake, if any.
    public var origin: String?
    /// The `Sec-WebSocket-Key` header of a websocket handshake, if any.
    var webSocketKey: String?
    /// For a request whose body the handler reads itself (``HTTPListener/Options/streamedPathPrefix``): the body,
    /// not read yet, and ``body`` is empty.
    var bodyStream: HTTPBodyStream?

    public init(
        method: String, path: String, query: String = "", host: String? = nil, serverKeyID: String? = nil,
        body: [UInt8] = [],
        oversizedBodyLength: Int64? = nil, remoteAddress: String = "", isTLS: Bool = false,
        received: ContinuousClock.Instant = .now
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.host = host
        self.serverKeyID = serverKeyID
        self.body = body
        self.oversizedBodyLength = oversizedBodyLength
        self.remoteAddress = remoteAddress
        self.isTLS = isTLS
        self.received = received
    }

    /// The query parameter `name`, percent-decoded (`+` is kept as is: CloudKit clients percent-encode it).
    ///
    /// Scans the query's UTF-8 bytes: splitting the `String` by `Character` cost ~75 k instructions a call, 10 % of
    /// a whole `records/lookup` (two calls a request, measured with callgrind).
    public func queryParameter(_ name: String) -> String? {
        // Over the contiguous bytes where the string has them (always, for what the front end builds): the generic
        // `String.UTF8View` slicing was still ~1.5 % of a lookup's CPU (perf).
        let found = query.utf8.withContiguousStorageIfAvailable { bytes in Self.valueRange(of: name, in: bytes) }
        let range = found ?? Self.valueRange(of: name, in: Array(query.utf8))
        guard let range else { return nil }
        let utf8 = query.utf8
        let start = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
        let end = utf8.index(start, offsetBy: range.count)
        return Self.percentDecode(Substring(utf8[start..<end]))
    }

    /// The offsets of parameter `name`'s value in `query` (`a=1&b=2`), if present.
    private static func valueRange<Bytes: RandomAccessCollection<UInt8>>(of name: String, in bytes: Bytes) -> Range<Int>?
    where Bytes.Index == Int {
        let key = name.utf8
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "&")) ?? bytes.endIndex
            let pair = bytes[start..<end]
            let equals = pair.firstIndex(of: UInt8(ascii: "=")) ?? end
            if !pair.isEmpty, pair[..<equals].elementsEqual(key) {
                return (equals < end ? equals + 1 : end)..<end
            }
            start = end < bytes.endIndex ? end + 1 : end
        }
        return nil
    }

    /// The value of cookie `name` in the `Cookie` header (`a=1; b=2`), if present.
    public func cookieValue(_ name: String) -> String? {
        guard let cookie else { return nil }
        for pair in cookie.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2, String(parts[0]).trimmingSpaces == name { return String(parts[1]).trimmingSpaces }
        }
        return nil
    }

    static func percentDecode(_ s: Substring) -> String {
        guard s.utf8.contains(UInt8(ascii: "%")) else { return String(s) }
        var out: [UInt8] = []
        var it = Array(s.utf8)[...]
        while let c = it.popFirst() {
            if c == UInt8(ascii: "%"), it.count >= 2, let h = hexValue(it[it.startIndex]),
                let l = hexValue(it[it.startIndex + 1])
            {
                out.append(h << 4 | l)
                it = it.dropFirst(2)
            } else {
                out.append(c)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
