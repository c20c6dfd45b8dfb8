import CEventHTTP

extension HTTPRequest {
    /// The request the front end read (`eh_request`): target split into the decoded path and the raw query, the
    /// headers the server uses, and the body when it was read whole.
    static func from(_ r: eh_request) -> HTTPRequest {
        let received = ContinuousClock.now
        let target = UnsafeRawBufferPointer(start: r.target, count: r.target_len)
        let question = target.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex
        let rawPath = String(decoding: target[..<question], as: UTF8.self)
        let query = question < target.endIndex ? String(decoding: target[(question + 1)...], as: UTF8.self) : ""
        var request = HTTPRequest(
            method: r.method.map { String(cString: $0) } ?? "GET",
            path: percentDecode(Substring(rawPath)), query: query,
            remoteAddress: withUnsafeBytes(of: r.remote) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) },
            isTLS: r.tls != 0, received: received)
        for i in 0..<r.header_count {
            let h = r.headers[i]
            let name = UnsafeRawBufferPointer(start: h.name, count: h.name_len)
            guard let known = KnownHeader(name) else { continue }
            let value = String(decoding: UnsafeRawBufferPointer(start: h.value, count: h.value_len), as: UTF8.self)
            switch known {
            case .host: request.host = request.host ?? value
            case .keyID: request.serverKeyID = request.serverKeyID ?? value
            case .range: request.range = request.range ?? value
            case .authorization: request.authorization = request.authorization ?? value
            case .date: request.serverKeyDate = request.serverKeyDate ?? value
            case .signature: request.serverKeySignature = request.serverKeySignature ?? value
            case .cookie: request.cookie = request.cookie.map { $0 + "; " + value } ?? value
            case .csrf: request.csrfToken = request.csrfToken ?? value
            case .origin: request.origin = request.origin ?? value
            case .webSocketKey: request.webSocketKey = request.webSocketKey ?? value
            }
        }
        if r.streamed == 0, r.oversized == 0, r.body_len > 0, let body = r.body {
            request.body = Array(UnsafeBufferPointer(start: body, count: r.body_len))
        }
        return request
    }

    /// The request headers the server reads, matched case-insensitively.
    private enum KnownHeader: CaseIterable {
        case host, keyID, range, authorization, date, signature, cookie, csrf, origin, webSocketKey

        var name: String {
            switch self {
            case .host: "host"
            case .keyID: "x-apple-cloudkit-request-keyid"
            case .range: "range"
            case .authorization: "authorization"
            case .date: "x-apple-cloudkit-request-iso8601date"
            case .signature: "x-apple-cloudkit-request-signaturev1"
            case .cookie: "cookie"
            case .csrf: "x-cloudlet-csrf"
            case .origin: "origin"
            case .webSocketKey: "sec-websocket-key"
            }
        }

        private static let byLength: [Int: [(KnownHeader, [UInt8])]] = Dictionary(
            grouping: allCases.map { ($0, Array($0.name.utf8)) }, by: { $0.1.count })

        init?(_ name: UnsafeRawBufferPointer) {
            guard let candidates = Self.byLength[name.count] else { return nil }
            for (header, lower) in candidates
            where zip(name, lower).allSatisfy({ ($0 | ($0 >= 65 && $0 <= 90 ? 0x20 : 0)) == $1 }) {
                self = header
                return
            }
            return nil
        }
    }
}
