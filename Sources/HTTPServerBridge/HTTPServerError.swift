internal import Glibc

/// Why an ``HTTPServer`` could not start.
public struct HTTPServerError: Error, CustomStringConvertible, CustomDebugStringConvertible, Equatable {
    private enum Code: Equatable {
        case invalidConfiguration(String)
        case alreadyStarted
        case cFunctionFailed(function: String, errno: Int32, address: String)
    }

    private let code: Code

    private init(_ code: Code) { self.code = code }

    /// A configuration value is out of range or the host is not a numeric address.
    static func invalidConfiguration(_ reason: String) -> HTTPServerError { .init(.invalidConfiguration(reason)) }
    /// `start()` was called on a server that is running or was stopped.
    static let alreadyStarted = HTTPServerError(.alreadyStarted)
    /// A C function failed; `errno` is the value right after the call (0 when it set none).
    static func cFunctionFailed(_ function: String, errno: Int32, address: String) -> HTTPServerError {
        .init(.cFunctionFailed(function: function, errno: errno, address: address))
    }

    /// A short, bounded label for logs and metrics: `invalid_configuration`, `already_started`,
    /// `address_in_use`, `start_failed`.
    public var shortCode: String {
        switch code {
        case .invalidConfiguration: "invalid_configuration"
        case .alreadyStarted: "already_started"
        case .cFunctionFailed(_, EADDRINUSE, _): "address_in_use"
        case .cFunctionFailed: "start_failed"
        }
    }

    /// True when the address and port were already bound by another socket (`EADDRINUSE`).
    public var isAddressInUse: Bool { shortCode == "address_in_use" }

    public var description: String {
        switch code {
        case .invalidConfiguration(let reason):
            "invalid HTTP server configuration: \(reason)"
        case .alreadyStarted:
            "HTTP server was already started"
        case .cFunctionFailed(let function, let errno, let address):
            "\(function) failed for \(address)" + (errno == 0 ? "" : ": \(String(cString: strerror(errno)))")
        }
    }

    public var debugDescription: String {
        switch code {
        case .cFunctionFailed(_, let errno, _): "HTTPServerError(\(shortCode), errno \(errno)): \(description)"
        default: "HTTPServerError(\(shortCode)): \(description)"
        }
    }
}
