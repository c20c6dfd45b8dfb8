import CloudletWire

extension APIError {
    /// The whole HTTP response for this error: `{uuid, serverErrorCode, reason, redirectURL?}`.
    var response: HTTPResponse {
        var w = JSONWriter()
        w.object { w in writeMembers(to: &w) }
        return HTTPResponse(status: status, body: w.bytes)
    }
}
