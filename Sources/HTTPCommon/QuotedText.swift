/// Text the client sent, as a problem quotes it back (a path, a member or query parameter name):
/// its first 200 characters, then `…`. The whole of it made the answer as large as the request (a
/// 7,000-byte path made a 7,190-byte 404; an unknown 20 KB member name was echoed twice, in
/// `detail` and `field`); its length is the client's to know.
package enum QuotedText {
    /// Most characters of client text a problem quotes.
    package static let limit = 200

    /// `text` when it holds at most ``limit`` bytes, else its first ``limit`` characters and `…`.
    package static func shown(_ text: String) -> String {
        text.utf8.count <= limit ? text : String(text.prefix(limit)) + "…"
    }
}
