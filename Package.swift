// swift-tools-version:6.2
// TokenRelay: layers point one way, and the compiler holds them (a target may import only what
// it depends on; docs/architecture.md draws this graph):
//   C* system libraries → *Bridge modules (the only code that touches C)
//   IdentityCore (pure rules, no I/O) → TokenRelayBase (errors, memory, lifecycle, logs, metrics,
//   settings) → TokenRelayStore (SQL, sealing) → TokenRelayAcquisition (silent and grant flows,
//   STS client, background jobs) → TokenRelaySignIn, TokenRelayDownstream → TokenRelayHTTP (pipeline, routes, problem
//   rendering) → TokenRelayServer (composition, lifecycle) → the token-relay executable (CLI).
// The emulator uses the bridges but none of IdentityCore (behaviour §9).
import Foundation
import PackageDescription

// The build's commit for `releaseId` (behaviour §8), compiled in from a file `make build` writes
// (scripts/release-id). A plain `swift build` of a fresh checkout has no such file yet: it is
// created here as `unknown`, so the build works and says it does not know its commit.
let releaseIdFile = Context.packageDirectory + "/Sources/TokenRelayBase/Operations/release-id"
if !FileManager.default.fileExists(atPath: releaseIdFile) {
    _ = FileManager.default.createFile(atPath: releaseIdFile, contents: Data("unknown\n".utf8))
}

// The service's layers are separate modules: in release builds their generic memories
// (ExpiringMap, ByteBoundedLRU) and small functions are specialised and inlined across them as
// they were inside one module (without it, the cached answer paid for generic metadata lookups).
let acrossLayers: [SwiftSetting] = [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]

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

        // MARK: The service, one layer a target; each depends only on the ones below it.
        .target(
            name: "TokenRelayBase", dependencies: ["IdentityCore", "CryptoBridge"],
            resources: [.embedInCode("Operations/release-id")], swiftSettings: acrossLayers),
        .target(
            name: "TokenRelayStore", dependencies: ["TokenRelayBase", "IdentityCore", "PostgresBridge", "CryptoBridge", "PKCS11Bridge"],
            swiftSettings: acrossLayers),
        // A request's context (deadline, caller, key limits) and the upstream HTTP client with its
        // retries and throttle memory: what the STS client and the downstream relay share.
        .target(
            name: "TokenRelayUpstream",
            dependencies: ["TokenRelayStore", "TokenRelayBase", "IdentityCore", "HTTPCommon", "HTTPClientBridge"],
            swiftSettings: acrossLayers),
        .target(
            name: "TokenRelayAcquisition",
            dependencies: [
                "TokenRelayUpstream", "TokenRelayStore", "TokenRelayBase", "IdentityCore", "HTTPCommon", "HTTPClientBridge", "PostgresBridge", "CryptoBridge",
            ],
            swiftSettings: acrossLayers),
        // Background work over acquisition and the store: keep-alive, webhooks, flushers,
        // readiness and health.
        .target(
            name: "TokenRelayOperations",
            dependencies: [
                "TokenRelayAcquisition", "TokenRelayUpstream", "TokenRelayStore", "TokenRelayBase", "IdentityCore", "HTTPCommon", "HTTPClientBridge",
                "PostgresBridge", "CryptoBridge",
            ],
            swiftSettings: acrossLayers),
        // Sign-in (authorization code + PKCE, signed links) and the downstream relay: flows over
        // acquisition, each its own target.
        .target(
            name: "TokenRelaySignIn",
            dependencies: [
                "TokenRelayAcquisition", "TokenRelayUpstream", "TokenRelayStore", "TokenRelayBase", "IdentityCore", "HTTPCommon", "HTTPClientBridge",
                "CryptoBridge",
            ],
            swiftSettings: acrossLayers),
        .target(
            name: "TokenRelayDownstream",
            dependencies: [
                "TokenRelayAcquisition", "TokenRelayUpstream", "TokenRelayStore", "TokenRelayBase", "IdentityCore", "HTTPCommon", "HTTPClientBridge",
            ],
            swiftSettings: acrossLayers),
        .target(
            name: "TokenRelayHTTP",
            dependencies: [
                "TokenRelaySignIn", "TokenRelayDownstream", "TokenRelayOperations", "TokenRelayAcquisition", "TokenRelayUpstream", "TokenRelayStore",
                "TokenRelayBase", "IdentityCore", "HTTPCommon",
                "HTTPServerBridge", "CryptoBridge",
            ],
            swiftSettings: acrossLayers),
        .target(
            name: "TokenRelayServer",
            dependencies: [
                "TokenRelayHTTP", "TokenRelaySignIn", "TokenRelayDownstream", "TokenRelayOperations", "TokenRelayAcquisition", "TokenRelayUpstream",
                "TokenRelayStore", "TokenRelayBase", "IdentityCore",
                "HTTPCommon",
                "HTTPServerBridge", "HTTPClientBridge", "PostgresBridge", "CryptoBridge", "PKCS11Bridge",
            ], swiftSettings: acrossLayers),
        // Benchmark seeding (bench/scale, bench/rewrap): linked by the CLI's `bench-seed` only, never by the service's layers.
        .target(
            name: "TokenRelayBenchSeed", dependencies: ["TokenRelayStore", "TokenRelayBase", "IdentityCore", "PostgresBridge", "CryptoBridge"],
            swiftSettings: acrossLayers),
        .executableTarget(
            name: "TokenRelayCLI",
            dependencies: [
                "TokenRelayServer", "TokenRelayBenchSeed", "TokenRelayHTTP", "TokenRelaySignIn", "TokenRelayDownstream", "TokenRelayOperations",
                "TokenRelayAcquisition", "TokenRelayUpstream",
                "TokenRelayStore", "TokenRelayBase",
                "IdentityCore", "HTTPCommon", "HTTPClientBridge", "PostgresBridge", "CryptoBridge", "PKCS11Bridge",
            ], swiftSettings: acrossLayers),
        .target(name: "STSEmulator", dependencies: ["HTTPCommon", "HTTPServerBridge", "CryptoBridge"]),
        .executableTarget(name: "STSEmulatorMain", dependencies: ["STSEmulator"]),

        // MARK: Tests.
        // glibc's heap statistics for tests of memory accounting (mallinfo2 does not import).
        .target(name: "CHeapStatistics"),
        .target(name: "TokenRelayTesting", dependencies: ["HTTPCommon", "HTTPClientBridge", "PostgresBridge", "CHeapStatistics"]),
        .testTarget(name: "IdentityCoreTests", dependencies: ["IdentityCore"]),
        .testTarget(
            name: "BridgeTests",
            dependencies: ["HTTPServerBridge", "HTTPCommon", "PostgresBridge", "HTTPClientBridge", "CryptoBridge", "PKCS11Bridge", "TokenRelayTesting"]
        ),
        .testTarget(name: "EmulatorTests", dependencies: ["STSEmulator", "HTTPClientBridge", "CryptoBridge", "TokenRelayTesting"]),
        .testTarget(
            name: "TokenRelayAppTests",
            dependencies: [
                "TokenRelayServer", "TokenRelayHTTP", "TokenRelaySignIn", "TokenRelayDownstream", "TokenRelayOperations", "TokenRelayAcquisition",
                "TokenRelayUpstream", "TokenRelayStore", "TokenRelayBase",
                "TokenRelayBenchSeed",
                "IdentityCore", "TokenRelayTesting", "STSEmulator", "HTTPCommon", "HTTPClientBridge", "PostgresBridge", "CryptoBridge",
                "HTTPServerBridge", "PKCS11Bridge",
            ]),
        .testTarget(
            name: "EndToEndTests", dependencies: ["TokenRelayTesting", "HTTPClientBridge", "HTTPCommon", "PostgresBridge", "HTTPServerBridge", "CryptoBridge"]),
    ],
    swiftLanguageModes: [.v6]
)
