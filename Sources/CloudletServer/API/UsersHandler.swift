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
}
