import Foundation
import HTTPCommon
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// Top-level `@odata.nextLink` / `@odata.deltaLink` under the API's base URL point back at the
/// relay; everything else is relayed byte for byte (behaviour §6.7).
@Suite("OData paging links point back at the relay")
struct ODataLinkRewriterTests {
    static let rewriter = ODataLinkRewriter(
        apiBaseURL: "https://graph.microsoft.com/v1.0", relayBaseURL: "https://relay.example/v1/downstream/graph")
    static let graphJSON = "application/json;odata.metadata=minimal;odata.streaming=true;IEEE754Compatible=false;charset=utf-8"

    static func response(_ body: String, contentType: String? = graphJSON, status: Int = 200, headers: [(String, String)] = []) -> HTTPResponse {
        var h = HTTPHeaders(headers)
        if let contentType { h.set("Content-Type", contentType) }
        return HTTPResponse(status: status, headers: h, body: Array(body.utf8))
    }

    static func rewritten(_ response: HTTPResponse) -> (count: Int, body: String) {
        var response = response
        let count = rewriter.rewrite(&response)
        return (count, String(decoding: response.body, as: UTF8.self))
    }

    @Test("A Graph page's absolute nextLink becomes the relay's URL; the rest of the body keeps its bytes")
    func nextLinkOfAPage() {
        let body =
            #"{"@odata.context":"https://graph.microsoft.com/v1.0/$metadata#users('x')/messages","value":[{"id":"1","n":1.50,"b":true}],"#
            + #""@odata.nextLink":"https://graph.microsoft.com/v1.0/me/messages?%24top=2&%24skip=2"}"#
        let (count, out) = Self.rewritten(Self.response(body))
        #expect(count == 1)
        #expect(
            out
                == body.replacingOccurrences(
                    of: "https://graph.microsoft.com/v1.0/me/messages?", with: "https://relay.example/v1/downstream/graph/me/messages?"))
        #expect(out.contains(#""n":1.50,"b":true"#), "numbers and member order stay as the API wrote them")
    }

    @Test("deltaLink too, with spacing, escaped slashes and a host in another case")
    func deltaLinkEscapedAndSpaced() {
        let body =
            "{\n  \"value\": [],\n  \"@odata.deltaLink\" : \"https:\\/\\/Graph.Microsoft.com\\/v1.0\\/me\\/mailFolders\\/inbox\\/messages\\/delta?%24deltatoken=abc\"\n}"
        let (count, out) = Self.rewritten(Self.response(body, contentType: "application/json"))
        #expect(count == 1)
        let parsed = (try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any]
        #expect(parsed?["@odata.deltaLink"] as? String == "https://relay.example/v1/downstream/graph/me/mailFolders/inbox/messages/delta?%24deltatoken=abc")
        #expect(out.hasPrefix("{\n  \"value\": [],\n  \"@odata.deltaLink\" : \"https:\\/\\/relay.example\\/v1"), "\(out)")
    }

    @Test(
        "Left as they are: links elsewhere, a longer host, nested links, non-JSON, errors, encoded or oversized bodies, other members",
        arguments: [
            (#"{"value":[],"@odata.nextLink":"https://graph.microsoft.us/v1.0/me/messages?%24skip=2"}"#, graphJSON, 200, [(String, String)]()),
            (#"{"value":[],"@odata.nextLink":"https://graph.microsoft.com/v1.0beta/me"}"#, graphJSON, 200, []),
            (#"{"value":[],"@odata.nextLink":"https://graph.microsoft.com/beta/me/messages?%24skip=2"}"#, graphJSON, 200, []),
            (
                #"{"responses":[{"id":"1","status":200,"body":{"@odata.nextLink":"https://graph.microsoft.com/v1.0/me/messages?%24skip=2"}}]}"#,
                graphJSON, 200, []
            ),
            (#"{"@odata.nextLink":"https://graph.microsoft.com/v1.0/me/messages?%24skip=2"}"#, "text/plain", 200, []),
            (#"{"@odata.nextLink":"https://graph.microsoft.com/v1.0/me/messages?%24skip=2"}"#, graphJSON, 400, []),
            (#"{"@odata.nextLink":"https://graph.microsoft.com/v1.0/me/messages?%24skip=2"}"#, graphJSON, 200, [("Content-Encoding", "gzip")]),
            (#"[{"@odata.nextLink":"https://graph.microsoft.com/v1.0/me/messages?%24skip=2"}]"#, graphJSON, 200, []),
            (#"{"@odata.id":"https://graph.microsoft.com/v1.0/me/messages/1","value":[]}"#, graphJSON, 200, []),
            (#"{"@odata.nextLinkage":"https://graph.microsoft.com/v1.0/me/messages?%24skip=2","value":[]}"#, graphJSON, 200, []),
            (#"{"@odata.nextLink":7,"value":[]}"#, graphJSON, 200, []),
            (#"{"@odata.nextLink":"https://graph.microsoft.com/v1.0/me", not json"#, graphJSON, 200, []),
        ])
    func untouched(body: String, contentType: String, status: Int, headers: [(String, String)]) {
        let (count, out) = Self.rewritten(Self.response(body, contentType: contentType, status: status, headers: headers))
        #expect(count == 0)
        #expect(out == body)
    }

    @Test("A body above the size limit is relayed untouched, one at the limit is rewritten")
    func sizeLimit() {
        var rewriter = Self.rewriter
        rewriter.maxBodyBytes = 4096
        #expect(ODataLinkRewriter.defaultMaxBodyBytes == 4 << 20)
        let link = #""@odata.nextLink":"https://graph.microsoft.com/v1.0/me/messages?%24skip=2""#
        func body(_ size: Int) -> HTTPResponse {
            let head = #"{"pad":""#, tail = #"","# + link + "}"
            return Self.response(head + String(repeating: "x", count: size - head.utf8.count - tail.utf8.count) + tail)
        }
        var atLimit = body(4096), over = body(4097)
        let original = over.body
        #expect(rewriter.rewrite(&atLimit) == 1)
        #expect(rewriter.rewrite(&over) == 0 && over.body == original)
    }

    @Test("A nested member with the same name before the top-level one is left alone")
    func nestedBeforeTopLevel() {
        let body =
            #"{"value":[{"@odata.nextLink":"https://graph.microsoft.com/v1.0/other"}],"@odata.nextLink":"https://graph.microsoft.com/v1.0/me/messages?%24skip=2"}"#
        let (count, out) = Self.rewritten(Self.response(body))
        #expect(count == 1)
        #expect(
            out
                == #"{"value":[{"@odata.nextLink":"https://graph.microsoft.com/v1.0/other"}],"@odata.nextLink":"https://relay.example/v1/downstream/graph/me/messages?%24skip=2"}"#
        )
    }

    @Test("The base URL alone, or followed by a query, is below it; a content type with +json counts as JSON")
    func boundaries() {
        #expect(Self.rewriter.relayed("https://graph.microsoft.com/v1.0") == "https://relay.example/v1/downstream/graph")
        #expect(Self.rewriter.relayed("https://graph.microsoft.com/v1.0?%24skip=1") == "https://relay.example/v1/downstream/graph?%24skip=1")
        #expect(Self.rewriter.relayed("https://graph.microsoft.com/v1.00/me") == nil)
        #expect(Self.rewriter.relayed("http://graph.microsoft.com/v1.0/me") == nil)
        #expect(ODataLinkRewriter.isJSON("application/vnd.api+json; charset=utf-8"))
        #expect(!ODataLinkRewriter.isJSON("text/json+html"))
        #expect(!ODataLinkRewriter.isJSON(nil))
    }
}
