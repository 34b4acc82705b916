public import HTTPCommon

/// A complete HTTP response: the same type the server bridge answers with. Every status
/// (including 3xx, 4xx and 5xx) arrives as a response, not as an error; redirects are not
/// followed; the body is decoded from chunked transfer coding but not from any `Content-Encoding`.
public typealias HTTPClientResponse = HTTPResponse
