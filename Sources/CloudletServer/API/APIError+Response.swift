import CloudletCore
import CloudletWire

extension APIError {
    /// `error` as the API answers it: an ``APIError`` as it is, a `CloudletError` by its code (``init(_:)``),
    /// anything else as `INTERNAL_ERROR` naming it (without host paths, ``HostPaths``). Every handler's last `catch`.
    init(answering error: any Error) {
        switch error {
        case let e as APIError: self = e
        case let e as CloudletError: self.init(e)
        default: self.init("INTERNAL_ERROR", HostPaths.redact("\(error)"))
        }
    }

    // Public for the cluster shell (CloudletCluster), which answers some requests before the router does.
    /// The whole HTTP response for this error: `{uuid, serverErrorCode, reason, redirectURL?}`.
    public var response: HTTPResponse {
        var w = JSONWriter()
        w.object { w in writeMembers(to: &w) }
        var response = HTTPResponse(status: status, body: w.bytes)
        if let retryAfter { response.headers.append(("Retry-After", String(Int(retryAfter.rounded(.up))))) }
        return response
    }
}
