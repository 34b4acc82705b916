import HTTPCommon

/// One test user the emulator can sign in.
public struct TestUser: Sendable, Equatable {
    /// The sign-in name (`preferred_username`, `upn`, Graph `userPrincipalName` and `mail`).
    public var username: String
    /// Display name (`name` claim, Graph `displayName`).
    public var name: String
    public var givenName: String
    public var surname: String
    /// The object id (`oid`), stable across runs.
    public var objectID: String

    public init(username: String, name: String, givenName: String? = nil, surname: String? = nil, objectID: String) {
        self.username = username
        self.name = name
        let parts = name.split(separator: " ", maxSplits: 1).map(String.init)
        self.givenName = givenName ?? parts.first ?? name
        self.surname = surname ?? (parts.count > 1 ? parts[1] : "")
        self.objectID = objectID
    }
}

/// A user of another tenant invited into this one (Entra B2B guest): signing in here gives
/// tokens with this tenant's `tid` and the guest's own `oid` here, while `client_info` still
/// names the home tenant (one `home_account_id`).
public struct TestGuest: Sendable, Equatable {
    /// The guest's home username (a user of another tenant).
    public var username: String
    /// The guest object id in this tenant.
    public var objectID: String

    public init(username: String, objectID: String) {
        self.username = username
        self.objectID = objectID
    }
}

/// One tenant (Entra ID directory or Azure AD B2C directory) and its users.
public struct TestTenant: Sendable, Equatable {
    /// The tenant id (`tid`), a GUID.
    public var id: String
    /// Domain names that may stand for the tenant in a path (e.g. `contoso.example`,
    /// `contosob2c.onmicrosoft.com`).
    public var domains: [String]
    /// True for an Azure AD B2C directory: paths carry a policy, errors are B2C-shaped
    /// (`error` + `error_description` only) and `client_info.uid` is `{oid}-{policy}`.
    public var isB2C: Bool
    public var users: [TestUser]
    /// Users of other tenants invited here.
    public var guests: [TestGuest]

    public init(id: String, domains: [String] = [], isB2C: Bool = false, users: [TestUser], guests: [TestGuest] = []) {
        self.id = id
        self.domains = domains
        self.isB2C = isB2C
        self.users = users
        self.guests = guests
    }

    /// The guest entry of `username` here (case-insensitive), if invited.
    public func guest(named username: String) -> TestGuest? {
        guests.first { $0.username.caseInsensitiveEquals(username) }
    }
}

/// The tenants and users the emulator knows.
///
/// A users file (`--users FILE.json`) has this shape; every field but `tenants[].id`,
/// `users[].username` and `users[].oid` is optional:
/// ```json
/// {
///   "tenants": [
///     {
///       "id": "11111111-1111-1111-1111-111111111111",
///       "domains": ["contoso.example"],
///       "b2c": false,
///       "users": [
///         {"username": "alice@contoso.example", "name": "Alice Example",
///          "given_name": "Alice", "surname": "Example",
///          "oid": "aaaaaaaa-0000-4000-8000-000000000001"}
///       ],
///       "guests": [{"username": "erin@other.example", "oid": "eeeeeeee-0000-4000-8000-000000000002"}]
///     }
///   ],
///   "app_roles": {"https://graph.microsoft.com": ["User.Read.All"]}
/// }
/// ```
/// `app_roles` are the `roles` of client-credentials tokens per resource.
public struct Directory: Sendable, Equatable {
    public var tenants: [TestTenant]
    /// Application permissions (`roles`) granted to the client per resource, for app tokens.
    public var appRoles: [String: [String]]
    /// Users derived from their index (bench/scale, `--scale-users`), none by default.
    public var scale: ScaleUsers?

    public init(tenants: [TestTenant], appRoles: [String: [String]] = [:]) {
        self.tenants = tenants
        self.appRoles = appRoles
    }

    /// Two Entra tenants and one B2C tenant:
    /// - `11111111-1111-1111-1111-111111111111` (`contoso.example`): `alice@contoso.example`
    ///   ("Alice Example"), `bob@contoso.example` ("Bob Example"), `erin@contoso.example`
    ///   ("Erin Example");
    /// - `22222222-2222-2222-2222-222222222222` (`fabrikam.example`): `carol@fabrikam.example`,
    ///   and `erin@contoso.example` as a guest;
    /// - B2C `33333333-3333-3333-3333-333333333333` (`contosob2c.onmicrosoft.com`):
    ///   `dave@b2c.example`.
    public static let `default` = Directory(
        tenants: [
            TestTenant(
                id: "11111111-1111-1111-1111-111111111111", domains: ["contoso.example"],
                users: [
                    TestUser(username: "alice@contoso.example", name: "Alice Example", objectID: "aaaaaaaa-0000-4000-8000-00000000a11c"),
                    TestUser(username: "bob@contoso.example", name: "Bob Example", objectID: "bbbbbbbb-0000-4000-8000-000000000b0b"),
                    TestUser(username: "erin@contoso.example", name: "Erin Example", objectID: "eeeeeeee-0000-4000-8000-00000000e410"),
                ]),
            TestTenant(
                id: "22222222-2222-2222-2222-222222222222", domains: ["fabrikam.example"],
                users: [
                    TestUser(username: "carol@fabrikam.example", name: "Carol Example", objectID: "cccccccc-0000-4000-8000-0000000ca501")
                ],
                guests: [TestGuest(username: "erin@contoso.example", objectID: "eeeeeeee-0000-4000-8000-0000000f0e57")]),
            TestTenant(
                id: "33333333-3333-3333-3333-333333333333", domains: ["contosob2c.onmicrosoft.com"], isB2C: true,
                users: [
                    TestUser(username: "dave@b2c.example", name: "Dave Example", objectID: "dddddddd-0000-4000-8000-00000000da7e")
                ]),
        ],
        appRoles: ["https://graph.microsoft.com": ["User.Read.All"]])

    /// Reads a users file.
    /// - Parameter json: the file's bytes (shape above).
    /// - Throws: `EmulatorConfigurationError` when the JSON or a required field is missing.
    public static func decode(_ json: [UInt8]) throws -> Directory {
        guard let root = JSONValue.parse(json), let tenantValues = root["tenants"]?.arrayValue else {
            throw EmulatorConfigurationError("users file: expected an object with a \"tenants\" array")
        }
        var tenants: [TestTenant] = []
        for tenantValue in tenantValues {
            guard let id = tenantValue["id"]?.stringValue else { throw EmulatorConfigurationError("users file: tenant without \"id\"") }
            var users: [TestUser] = []
            for userValue in tenantValue["users"]?.arrayValue ?? [] {
                guard let username = userValue["username"]?.stringValue, let oid = userValue["oid"]?.stringValue else {
                    throw EmulatorConfigurationError("users file: user without \"username\" or \"oid\" in tenant \(id)")
                }
                users.append(
                    TestUser(
                        username: username, name: userValue["name"]?.stringValue ?? username,
                        givenName: userValue["given_name"]?.stringValue, surname: userValue["surname"]?.stringValue, objectID: oid))
            }
            var guests: [TestGuest] = []
            for guestValue in tenantValue["guests"]?.arrayValue ?? [] {
                guard let username = guestValue["username"]?.stringValue, let oid = guestValue["oid"]?.stringValue else {
                    throw EmulatorConfigurationError("users file: guest without \"username\" or \"oid\" in tenant \(id)")
                }
                guests.append(TestGuest(username: username, objectID: oid))
            }
            tenants.append(
                TestTenant(
                    id: id.lowercased(), domains: (tenantValue["domains"]?.arrayValue ?? []).compactMap(\.stringValue),
                    isB2C: tenantValue["b2c"]?.boolValue ?? false, users: users, guests: guests))
        }
        var roles: [String: [String]] = [:]
        if case .object(let members) = root["app_roles"] ?? .null {
            for (resource, list) in members { roles[resource] = (list.arrayValue ?? []).compactMap(\.stringValue) }
        }
        return Directory(tenants: tenants, appRoles: roles)
    }

    /// The tenant a path segment names: its id or one of its domains (case-insensitive).
    public func tenant(named segment: String) -> TestTenant? {
        tenants.first { $0.id.caseInsensitiveEquals(segment) || $0.domains.contains { $0.caseInsensitiveEquals(segment) } }
    }

    /// The user with this username (case-insensitive) and the tenant holding it.
    public func user(named username: String) -> (user: TestUser, tenant: TestTenant)? {
        for tenant in tenants {
            if let user = tenant.users.first(where: { $0.username.caseInsensitiveEquals(username) }) { return (user, tenant) }
        }
        return scale?.index(ofUsername: username).flatMap { scaleUser($0) }
    }

    /// Scale user `index` (``ScaleUsers``), in the directory's first or second non-B2C tenant.
    func scaleUser(_ index: Int) -> (user: TestUser, tenant: TestTenant)? {
        scale?.user(index, tenants: tenants.filter { !$0.isB2C })
    }
}
