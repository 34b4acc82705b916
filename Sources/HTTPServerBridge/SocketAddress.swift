internal import Glibc

/// A numeric IPv4 or IPv6 socket address, as `MHD_OPTION_SOCK_ADDR` takes it and as
/// `MHD_CONNECTION_INFO_CLIENT_ADDRESS` gives it back.
struct SocketAddress {
    private var storage = sockaddr_storage()

    /// True for an IPv6 address (the daemon then needs `MHD_USE_IPv6`).
    var isIPv6: Bool { Int32(storage.ss_family) == AF_INET6 }

    /// Parses a numeric host (`127.0.0.1`, `::1`; `localhost` means `127.0.0.1`) and a port.
    /// - Returns: nil when the host is not a numeric address or the port is out of range.
    init?(host: String, port: Int) {
        guard (0...65535).contains(port) else { return nil }
        let numericHost = host == "localhost" ? "127.0.0.1" : host
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, numericHost, &v4) == 1 {
            withUnsafeMutableBytes(of: &storage) { raw in
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                sin.pointee.sin_family = sa_family_t(AF_INET)
                sin.pointee.sin_port = in_port_t(UInt16(port).bigEndian)
                sin.pointee.sin_addr = v4
            }
        } else if inet_pton(AF_INET6, numericHost, &v6) == 1 {
            withUnsafeMutableBytes(of: &storage) { raw in
                let sin6 = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                sin6.pointee.sin6_family = sa_family_t(AF_INET6)
                sin6.pointee.sin6_port = in_port_t(UInt16(port).bigEndian)
                sin6.pointee.sin6_addr = v6
            }
        } else {
            return nil
        }
    }

    /// Calls `body` with the address as a `sockaddr` pointer valid only during the call.
    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>) -> R) -> R {
        withUnsafeBytes(of: storage) { raw in body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)) }
    }

    /// The numeric text of a peer address (`127.0.0.1`, `::1`), or nil for another family.
    static func numericHost(of address: UnsafePointer<sockaddr>) -> String? {
        if Int32(address.pointee.sa_family) == AF_INET {
            // Dotted quad written here: glibc's inet_ntop formats IPv4 through sprintf, a
            // measurable share of a cached silent request (behaviour §10).
            let bits = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
            // At most 15 bytes: a small string, written in place without an allocation.
            return String(unsafeUninitializedCapacity: 15) { text in
                var count = 0
                func put(_ byte: UInt8) {
                    text[count] = byte
                    count += 1
                }
                for shift in [24, 16, 8, 0] {
                    let octet = UInt8(truncatingIfNeeded: bits >> UInt32(shift))
                    if shift != 24 { put(UInt8(ascii: ".")) }
                    if octet >= 100 { put(UInt8(ascii: "0") + octet / 100) }
                    if octet >= 10 { put(UInt8(ascii: "0") + octet / 10 % 10) }
                    put(UInt8(ascii: "0") + octet % 10)
                }
                return count
            }
        }
        var buffer = (0 as UInt64, 0 as UInt64, 0 as UInt64, 0 as UInt64, 0 as UInt64, 0 as UInt64, 0 as UInt64)  // 56 ≥ INET6_ADDRSTRLEN
        return withUnsafeMutableBytes(of: &buffer) { raw -> String? in
            let text = raw.baseAddress!.assumingMemoryBound(to: CChar.self)
            let ok: UnsafePointer<CChar>?
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                ok = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    withUnsafePointer(to: sin.pointee.sin_addr) { inet_ntop(AF_INET, $0, text, socklen_t(raw.count)) }
                }
            case AF_INET6:
                ok = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    withUnsafePointer(to: sin6.pointee.sin6_addr) { inet_ntop(AF_INET6, $0, text, socklen_t(raw.count)) }
                }
            default:
                ok = nil
            }
            return ok.map { String(cString: $0) }
        }
    }
}
