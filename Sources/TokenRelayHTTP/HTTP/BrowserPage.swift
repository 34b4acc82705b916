import CryptoBridge
import Foundation
import HTTPCommon
import IdentityCore
import TokenRelayBase

/// What a person's browser sees on the routes it visits (the sign-in callback and signed
/// sign-in links, behaviour §3.2–§3.3): a short readable HTML page instead of JSON when the
/// request asks for HTML (`Accept` naming `text/html`, as every browser's navigation does).
/// API callers (any other `Accept`) keep `application/problem+json` and the JSON account; the
/// status and headers are the same either way.
package enum BrowserPage {
    /// Whether `headers` ask for HTML: an `Accept` field naming `text/html` (RFC 9110 §12.5.1;
    /// a `q=0` on it refuses it).
    package static func wanted(by headers: HTTPHeaders) -> Bool {
        for value in headers.values(for: "Accept") {
            for range in value.split(separator: ",") {
                let parts = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                guard parts.first == "text/html" else { continue }
                let weight = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
                return weight > 0
            }
        }
        return false
    }

    /// The problem as a page: its title and detail, what the person can do next (sign in again
    /// with the problem's `sign_in_url`; go back to the application the sign-in came from,
    /// ``RelayError/returnTo``), and the error code and correlation id to quote to support.
    /// - Parameter json: the problem+json answer whose status and headers the page keeps.
    package static func problem(_ problem: RelayError, correlationId: String, replacing json: HTTPResponse) -> HTTPResponse {
        var body = "<h1>\(HTMLText.escape(heading(problem.code)))</h1>\n<p id=\"detail\">\(HTMLText.escape(problem.detail))</p>\n"
        if case .string(let link)? = problem.extensions["sign_in_url"] {
            body += "<p><a id=\"sign-in-again\" href=\"\(HTMLText.escape(link))\">Sign in again</a></p>\n"
        }
        if let returnTo = problem.returnTo {
            body += "<p><a id=\"return\" href=\"\(HTMLText.escape(returnTo))\">Back to the application</a></p>\n"
        }
        body += """
            <p class="meta">Error <code id="error">\(HTMLText.escape(problem.code.rawValue))</code> (HTTP \(problem.status)), \
            correlation id <code id="correlation-id">\(HTMLText.escape(correlationId))</code>.</p>

            """
        var headers = json.headers
        setPageHeaders(&headers)
        return HTTPResponse(
            status: json.status, headers: headers, body: Array(document(title: heading(problem.code), body).utf8), clientRequestId: json.clientRequestId)
    }

    /// The signed-in page of a callback without `redirect_after`: who signed in and the account id.
    package static func signedIn(username: String?, accountId: String) -> HTTPResponse {
        let body = """
            <h1>You are signed in</h1>
            <p>The account <b id="username">\(HTMLText.escape(username ?? "(no username)"))</b> is connected to TokenRelay as \
            <code id="account-id">\(HTMLText.escape(accountId))</code>. You can close this window.</p>

            """
        var headers = HTTPHeaders()
        setPageHeaders(&headers)
        return HTTPResponse(status: 200, headers: headers, body: Array(document(title: "Signed in", body).utf8))
    }

    /// The one style rule set every page carries, inline (no file to serve).
    static let style =
        "body { font-family: sans-serif; max-width: 36rem; margin: 2rem auto; padding: 0 1rem; } .meta { color: #555; font-size: .9rem; }"

    /// The policy of every page (CSP Level 3). A page has no script, image, font or form, only
    /// links and the inline ``style``: the style is allowed by its hash, and nothing else is
    /// loaded, should a value ever reach a page unescaped. `frame-ancestors 'none'`: no other
    /// site may show the page in a frame (a "Sign in again" link or "You are signed in" under
    /// another site's buttons, clickjacking).
    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'sha256-\(Data(SHA256.hash(utf8: style)).base64EncodedString())'; base-uri 'none'; form-action 'none'; "
        + "frame-ancestors 'none'"

    /// Sets the headers of every HTML answer: its type, never stored (it names the account),
    /// the policy above, `X-Frame-Options: DENY` for browsers without `frame-ancestors`, and
    /// `nosniff`, so that no browser reads the page as another type than it says.
    static func setPageHeaders(_ headers: inout HTTPHeaders) {
        headers.set("Content-Type", "text/html; charset=utf-8")
        headers.set("Cache-Control", "no-store")
        headers.set("Content-Security-Policy", contentSecurityPolicy)
        headers.set("X-Frame-Options", "DENY")
        headers.set("X-Content-Type-Options", "nosniff")
    }

    /// What the page says first, in a person's words.
    package static func heading(_ code: ProblemCode) -> String {
        switch code {
        case .userCanceled: "The sign-in was canceled"
        case .interactionRequired: "Please sign in again"
        case .forbidden: "This sign-in link cannot be used"
        case .invalidRequest: "This sign-in cannot be completed"
        case .upstreamError, .upstreamUnavailable, .internal: "The sign-in failed"
        default: "The sign-in failed: \(code.title.lowercased())"
        }
    }

    package static func document(title: String, _ body: String) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(HTMLText.escape(title)) - TokenRelay</title>
        <style>\(style)</style>
        </head><body>
        \(body)</body></html>

        """
    }
}
