import CloudletWire

extension APIError {
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
