import CloudletConcurrency
import CloudletWire

/// `users/caller` (the caller's user identity) and `users/current` (the older user dictionary). Both need a
/// signed-in user; Cloudlet knows a user's name, which it reports as the given name.
struct UsersHandler {
    let user: Credentials.User

    /// `{userRecordName, nameComponents: {givenName}, lookupInfo: {userRecordName}}`.
    func caller() -> [UInt8] {
        var w = JSONWriter()
        w.object { w in
            w.member("userRecordName", user.userRecordName)
            w.key("nameComponents")
            w.object { w in w.member("givenName", user.name) }
            w.key("lookupInfo")
            w.object { w in w.member("userRecordName", user.userRecordName) }
        }
        return w.bytes
    }

    /// `{userRecordName, firstName}`.
    func current() -> [UInt8] {
        var w = JSONWriter()
        w.object { w in
            w.member("userRecordName", user.userRecordName)
            w.member("firstName", user.name)
        }
        return w.bytes
    }

    /// `users/discover` (GET: every discoverable user; POST `{lookupInfos: [{emailAddress | userRecordName |
    /// phoneNumber}]}`) → `{users: [identity]}`; the older `users/lookup/email` (`{users: [{emailAddress}]}`),
    /// `users/lookup/id` (`{users: [{userRecordName}]}`) and `users/lookup/contacts` (`{contacts:
    /// [{emailAddresses: […]}]}`) → `{users: [{userRecordName, firstName, emailAddress}]}`. Only users who opted in
    /// (`cloudlet user add --discoverable`) are ever found; the others are left out as if they did not exist.
    /// Phone numbers find no one (Cloudlet keeps none).
    func discover(_ route: Route, body: [String: JSONValue], credentials: Credentials) throws -> [UInt8] {
        var emails: [String] = []
        var names: [String] = []
        var all = false
        func collect(_ key: String, at path: String) throws {
            guard let items = try body.array(key, at: "") else { throw APIError.badRequest("\(key) is missing") }
            guard items.count <= 200 else { throw APIError.badRequest("\(items.count) \(key) in one request; the limit is 200") }
            for (i, item) in items.enumerated() {
                let o = try item.requireObject(at: "\(key)[\(i)]")
                if let e = try o.string("emailAddress", at: "\(key)[\(i)]") { emails.append(e) }
                if let n = try o.string("userRecordName", at: "\(key)[\(i)]") { names.append(n) }
                for e in try o.strings("emailAddresses", at: "\(key)[\(i)]") ?? [] { emails.append(e) }
            }
        }
        switch route {
        case .usersDiscover:
            if body["lookupInfos"] == nil { all = true } else { try collect("lookupInfos", at: "") }
        case .usersLookupEmail, .usersLookupID: try collect("users", at: "")
        case .usersLookupContacts: try collect("contacts", at: "")
        default: preconditionFailure("\(route) is no user lookup")
        }
        let (e, n, everyone) = (emails, names, all)
        let found = try ThreadBridge.wait {
            everyone ? try await credentials.users().filter(\.discoverable) : try await credentials.discover(emails: e, userRecordNames: n)
        }
        var w = JSONWriter()
        w.object { w in
            w.key("users")
            w.array { w in
                for p in found {
                    w.object { w in
                        w.member("userRecordName", p.user.userRecordName)
                        if route == .usersDiscover {
                            w.key("nameComponents")
                            w.object { w in w.member("givenName", p.user.name) }
                            w.key("lookupInfo")
                            w.object { w in
                                if let email = p.email { w.member("emailAddress", email) }
                                w.member("userRecordName", p.user.userRecordName)
                            }
                        } else {
                            w.member("firstName", p.user.name)
                            if let email = p.email { w.member("emailAddress", email) }
                        }
                    }
                }
            }
        }
        return w.bytes
    }
}
