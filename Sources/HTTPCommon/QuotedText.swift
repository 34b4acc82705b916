/// Text the client sent, as a problem quotes it back (a path; a member, query parameter or header
/// name; a `Content-Encoding` value): its first 200 Unicode scalars, then `…`. Quoted whole, it
/// would make the answer as large as the request, twice over where it is both `detail` and
/// `field`; its length is the client's to know.
///
/// Counted in Unicode scalars, not `Character`s: a grapheme cluster has no bound (`e` and 25,000
/// U+0301 is one `Character`, so 200 of them can be any size), a scalar is at most 4
/// bytes of UTF-8, so a quote is at most 800 bytes and 3 more for the `…`. Not UTF-8 bytes either:
/// a cut between scalars always leaves text, and 200 names what a person counts as characters in
/// the names the service documents (ASCII). A cut may split a cluster (an accent from its letter).
package enum QuotedText {
    /// Most Unicode scalars of client text a problem quotes.
    package static let limit = 200

    /// `text` when it holds at most ``limit`` Unicode scalars, else its first ``limit`` and `…`.
    package static func shown(_ text: String) -> String {
        // At most `limit` bytes is at most `limit` scalars: most text is kept without counting.
        guard text.utf8.count > limit else { return text }
        let scalars = text.unicodeScalars
        guard let end = scalars.index(scalars.startIndex, offsetBy: limit, limitedBy: scalars.endIndex), end < scalars.endIndex else { return text }
        return String(scalars[..<end]) + "…"
    }
}
