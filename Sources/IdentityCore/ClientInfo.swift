import Foundation

/// The STS's `client_info`: base64url JSON `{"uid": ..., "utid": ...}` returned when the
/// request sends `client_info=1`.
///
/// Source: behaviour §1 "Account"; MSAL's account model (`home_account_id` = `{uid}.{utid}`).
/// For B2C the uid is `{oid}-{policy}`: never build it from id_token claims.
public struct ClientInfo: Sendable, Equatable {
    /// The user's object id in the home tenant (B2C: `{oid}-{policy}`).
    public let uid: String
    /// The home tenant id.
    public let utid: String

    public init(uid: String, utid: String) {
        self.uid = uid
        self.utid = utid
    }

    /// `{uid}.{utid}`: the account's stable identifier across tenants.
    public var homeAccountId: String { "\(uid).\(utid)" }

    /// Whether this is the user of `homeAccountId` (`{uid}.{utid}`), compared as MSAL compares
    /// the account a sign-in returned with the account it asked for (MSAL for iOS and macOS,
    /// `MSALErrorMismatchedUser`): the same object id in the same home tenant, ignoring case
    /// (GUIDs). For B2C (`b2c`) the uid is `{oid}-{policy}` and a user signing in through another
    /// user flow is the same user: only the object id before the policy is compared.
    public func isUser(of homeAccountId: String, b2c: Bool) -> Bool {
        guard let dot = homeAccountId.lastIndex(of: ".") else { return false }
        let expectedUid = String(homeAccountId[..<dot])
        let expectedUtid = String(homeAccountId[homeAccountId.index(after: dot)...])
        guard expectedUtid.lowercased() == utid.lowercased() else { return false }
        if b2c { return Self.objectId(ofB2C: expectedUid).lowercased() == Self.objectId(ofB2C: uid).lowercased() }
        return expectedUid.lowercased() == uid.lowercased()
    }

    /// The object id of a B2C uid (`{oid}-{policy}`, the oid a 36-character GUID); the uid as it
    /// is when it does not have that shape.
    static func objectId(ofB2C uid: String) -> Substring {
        let utf8 = Array(uid.utf8)
        guard utf8.count > 37, utf8[36] == UInt8(ascii: "-") else { return Substring(uid) }
        return uid.prefix(36)
    }

    /// Decodes a `client_info` value.
    /// - Parameter base64url: base64url (padding optional) of the JSON object.
    /// - Returns: the decoded ids.
    /// - Throws: `ClientInfoError` when the value is not base64url JSON with non-empty
    ///   `uid` and `utid` strings.
    public static func decode(_ base64url: String) throws(ClientInfoError) -> ClientInfo {
        guard let bytes = Base64URL.decode(base64url) else { throw ClientInfoError(detail: "client_info is not base64url") }
        guard let object = JSONValue.parse(bytes)?.objectValue else { throw ClientInfoError(detail: "client_info is not a JSON object") }
        guard let uid = object["uid"]?.stringValue, !uid.isEmpty,
            let utid = object["utid"]?.stringValue, !utid.isEmpty
        else { throw ClientInfoError(detail: "client_info lacks uid or utid") }
        return ClientInfo(uid: uid, utid: utid)
    }
}

/// A `client_info` value that could not be decoded. `detail` is safe to log.
public struct ClientInfoError: Error, Sendable, Equatable, CustomStringConvertible {
    public let detail: String
    public var description: String { "invalid client_info: \(detail)" }
}
