import IdentityCore
import TokenRelayBase
import TokenRelayStore

/// The parts of a silent token answer (behaviour §2, response 200) that do not depend on the
/// request, as JSON bytes: everything before the account object, and everything after the
/// correlation id. The members are fixed and written in sorted order, so the answer is
/// `head + account + ,"correlation_id":"…" + tail`, byte for byte what ``TokenRoutes/tokenBody``
/// writes.
///
/// Made once when a token is stored in memory (``MemoryTokenCache``), so a cache hit copies
/// bytes instead of scanning and escaping a 2 KB access token on every request (issue 14). A
/// class: a hit's answer is handed through the plan and the result, one reference count a step.
package final class TokenAnswerBytes: Sendable {
    /// `{"access_token":"…","account":`
    package let head: [UInt8]
    /// `[,"declined_scopes":[…]],"expires_on":…,"ext_expires_on":…[,"extended_lifetime":true],"scopes":[…],"source":"…","token_type":"Bearer"}`
    package let tail: [UInt8]

    package var byteCount: Int { head.count + tail.count }

    /// Heap bytes held (``HeapCost``): this object and both parts' buffers.
    package var heapCost: Int { HeapCost.object(fieldBytes: 16) + HeapCost.array(head) + HeapCost.array(tail) }

    /// The parts of the answer for `token` served from memory (`source: cache`, nothing declined).
    package convenience init(cached token: StoredAccessToken) {
        self.init(token: token, source: .cache, declinedScopes: [], extendedLifetime: false)
    }

    package init(token: StoredAccessToken, source: SilentTokenResult.Source, declinedScopes: [String], extendedLifetime: Bool) {
        var head: [UInt8] = []
        head.reserveCapacity(token.secret.utf8.count + 32)
        head.append(contentsOf: #"{"access_token":"#.utf8)
        JSONWriter.writeString(token.secret, into: &head)
        head.append(contentsOf: #","account":"#.utf8)
        var tail: [UInt8] = []
        tail.reserveCapacity(256)
        func strings(_ items: [String]) {
            tail.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { tail.append(UInt8(ascii: ",")) }
                JSONWriter.writeString(item, into: &tail)
            }
            tail.append(UInt8(ascii: "]"))
        }
        if !declinedScopes.isEmpty {
            tail.append(contentsOf: #","declined_scopes":"#.utf8)
            strings(declinedScopes)
        }
        tail.append(contentsOf: #","expires_on":"#.utf8)
        _ = JSONWriter.writeNumber(Double(token.expiresOn), into: &tail)
        tail.append(contentsOf: #","ext_expires_on":"#.utf8)
        _ = JSONWriter.writeNumber(Double(token.extExpiresOn ?? token.expiresOn), into: &tail)
        if extendedLifetime { tail.append(contentsOf: #","extended_lifetime":true"#.utf8) }
        tail.append(contentsOf: #","scopes":"#.utf8)
        strings(token.scopes)
        tail.append(contentsOf: #","source":"#.utf8)
        JSONWriter.writeString(source.rawValue, into: &tail)
        tail.append(contentsOf: #","token_type":"Bearer"}"#.utf8)
        self.head = head
        self.tail = tail
    }

    /// The whole answer: these parts around `account`'s JSON object (with `owner`'s external id,
    /// ``AccountRecord/writeJSON(owner:into:)``) and `correlationId`.
    /// - Parameter buffer: an empty buffer to write into, whose storage is used when it is large
    ///   enough (the server's reused body buffers).
    package func answer(account: AccountRecord, owner: String?, correlationId: String, into buffer: consuming [UInt8] = []) -> [UInt8] {
        // Written into the parameter itself: a `var` copy would share the storage and copy it on the first write.
        buffer.reserveCapacity(head.count + account.jsonBytes.count + correlationId.utf8.count + tail.count + 160)
        buffer.append(contentsOf: head)
        account.writeJSON(owner: owner, into: &buffer)
        buffer.append(contentsOf: #","correlation_id":"#.utf8)
        JSONWriter.writeString(correlationId, into: &buffer)
        buffer.append(contentsOf: tail)
        return buffer
    }
}
