import HTTPCommon
import TokenRelayBase

// A header or query parameter that names one thing (a key, an account, a deadline, a page) may
// appear once. With two, the request is ambiguous: reading the first would let a proxy and
// TokenRelay each act on a different one. RFC 9110 §5.3 lets a recipient combine only list
// fields; RFC 6749 §3.1 forbids repeating an OAuth parameter.

extension HTTPHeaders {
    /// The value of the field `name` when it appears at most once; nil when absent.
    /// - Throws: `RelayError` 400 `invalid_request` naming the field when it appears more than once.
    package func only(_ name: String) throws(RelayError) -> String? {
        var found: String?
        for field in self where field.name.caseInsensitiveEquals(name) {
            guard found == nil else { throw RelayError.invalidRequest(field: name, "Send the header '\(name)' once.") }
            found = field.value
        }
        return found
    }
}

extension HTTPRequest {
    /// The value of the query parameter `name` when it appears at most once; nil when absent.
    /// - Throws: `RelayError` 400 `invalid_request` naming the parameter when it appears more than once.
    package func onlyQueryValue(_ name: String) throws(RelayError) -> String? {
        var found: String?
        for item in query where item.name == name {
            guard found == nil else {
                throw RelayError.invalidRequest(field: name, "Send the query parameter '\(name)' once.")
            }
            found = item.value
        }
        return found
    }

    /// Every query parameter by name, each given once.
    /// - Throws: `RelayError` 400 `invalid_request` naming the first parameter given twice.
    package func uniqueQuery() throws(RelayError) -> [String: String] {
        var parameters: [String: String] = [:]
        for item in query {
            guard parameters.updateValue(item.value, forKey: item.name) == nil else {
                throw RelayError.invalidRequest(field: item.name, "Send the query parameter '\(item.name)' once.")
            }
        }
        return parameters
    }
}
