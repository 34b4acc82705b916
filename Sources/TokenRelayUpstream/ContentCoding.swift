import HTTPCommon
import IdentityCore
import TokenRelayBase

extension HTTPHeaders {
    /// Refuses a request body in a content coding (RFC 9110 §8.4): TokenRelay decodes none, so a
    /// gzipped JSON body was 400 "must be JSON text" and a plain body labelled gzip was read as if
    /// unlabelled; the downstream relay does not pass `Content-Encoding` on, so the API got coded
    /// bytes as plain ones. `identity` (the absence of a coding) and an empty value are taken.
    /// Cheap when the header is absent, as on nearly every request: a length check per field.
    /// - Throws: `RelayError` 415 `unsupported_media_type` naming `Content-Encoding` (RFC 9110
    ///   §15.5.16: a server answers a coding it does not support with 415).
    package func requireIdentityCoding() throws(RelayError) {
        guard containsName(ofLength: 16) else { return }
        for value in values(for: "Content-Encoding") {
            for coding in value.split(separator: ",") {
                let coding = coding.trimmingCharacters(in: .whitespaces)
                guard coding.isEmpty || coding.lowercased() == "identity" else {
                    throw RelayError(
                        .unsupportedMediaType,
                        "The request body's Content-Encoding '\(QuotedText.shown(coding))' is not supported; send the body without a coding (RFC 9110 §8.4).",
                        extensions: ["field": .string("Content-Encoding")])
                }
            }
        }
    }
}
