// swift-tools-version:6.2
// TokenRelay: layers point one way.
//   C* system libraries → *Bridge modules (the only code that touches C) → IdentityCore (pure
//   Swift, no I/O) → TokenRelayApp (acquisition, accounts, routes, store) → two executables.
// The emulator uses the bridges but none of IdentityCore (behaviour §9).
import Foundation
import PackageDescription

// The build's commit for `releaseId` (behaviour §8), compiled in from a file `make build` writes
// (scripts/release-id). A plain `swift build` of a fresh checkout has no such file yet: it is
// created here as `unknown`, so the build works and says it does not know its commit.
let releaseIdFile = Context.packageDirectory + "/Sources/TokenRelayApp/Operations/release-id"
if !FileManager.default.fileExists(atPath: releaseIdFile) {
    FileManager.default.createFile(atPath: releaseIdFile, contents: Data("unknown\n".utf8))
}

let package = Package(
    name: "TokenRelay",
    products: [
        .executable(name: "token-relay", targets: ["TokenRelayCLI"]),
        .executable(name: "sts-emulator", targets: ["STSEmulatorMain"]),
    ],
    targets: [
        // MARK: C libraries from Debian (pkg-config names).
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // Headers only: the PKCS#11 module itself is loaded at run time (dlopen).
        .systemLibrary(name: "CPKCS11", providers: [.apt(["libp11-kit-dev"])]),

        // MARK: Bridges: one Swift module per C library; no C type leaks out.
        .target(name: "HTTPCommon"),
        .target(name: "HTTPServerBridge", dependencies: ["CMicroHTTPD", "HTTPCommon"]),
        .target(name: "PostgresBridge", dependencies: ["CPostgres"]),
        .target(name: "HTTPClientBridge", dependencies: ["CCurl", "HTTPCommon"]),
        .target(name: "CryptoBridge", dependencies: ["COpenSSL"]),
        .target(name: "PKCS11Bridge", dependencies: ["CPKCS11"]),

        // MARK: Identity core: authority, scopes, cache rules, error mapping, retry policy.
        .target(name: "IdentityCore"),

        // MARK: Application and executables.
        .target(
            name: "TokenRelayApp",
            dependencies: ["IdentityCore", "HTTPCommon", "HTTPServerBridge", "PostgresBridge", "HTTPClientBridge", "CryptoBridge", "PKCS11Bridge"],
            resources: [.embedInCode("Operations/release-id")]
        ),
        .executableTarget(name: "TokenRelayCLI", dependencies: ["TokenRelayApp"]),
        .target(name: "STSEmulator", dependencies: ["HTTPCommon", "HTTPServerBridge", "CryptoBridge"]),
        .executableTarget(name: "STSEmulatorMain", dependencies: ["STSEmulator"]),

        // MARK: Tests.
        // glibc's heap statistics for tests of memory accounting (mallinfo2 does not import).
        .target(name: "CHeapStatistics"),
        .target(name: "TokenRelayTesting", dependencies: ["HTTPCommon", "HTTPClientBridge", "PostgresBridge", "CHeapStatistics"]),
        .testTarget(name: "IdentityCoreTests", dependencies: ["IdentityCore"]),
        .testTarget(
            name: "BridgeTests",
            dependencies: ["HTTPServerBridge", "PostgresBridge", "HTTPClientBridge", "CryptoBridge", "PKCS11Bridge", "TokenRelayTesting"]
        ),
        .testTarget(name: "EmulatorTests", dependencies: ["STSEmulator", "HTTPClientBridge", "CryptoBridge", "TokenRelayTesting"]),
        .testTarget(name: "TokenRelayAppTests", dependencies: ["TokenRelayApp", "IdentityCore", "TokenRelayTesting", "STSEmulator"]),
        .testTarget(
            name: "EndToEndTests", dependencies: ["TokenRelayTesting", "HTTPClientBridge", "HTTPCommon", "PostgresBridge", "HTTPServerBridge", "CryptoBridge"]),
    ],
    swiftLanguageModes: [.v6]
)
