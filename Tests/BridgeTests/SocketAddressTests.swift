import Testing

@testable import HTTPServerBridge

@Suite("Socket address text")
struct SocketAddressTests {
    @Test("An IPv4 peer reads as inet_ntop writes it; IPv6 too", arguments: ["0.0.0.0", "127.0.0.1", "10.200.9.255", "192.168.100.20", "::1", "fe80::1"])
    func numericText(_ host: String) throws {
        let address = try #require(SocketAddress(host: host, port: 8080))
        #expect(address.withSockAddr { SocketAddress.numericHost(of: $0) } == host)
    }
}
