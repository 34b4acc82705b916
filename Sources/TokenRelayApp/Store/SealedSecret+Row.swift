import PostgresBridge

extension SealedSecret {
    /// The sealed secret in a row's `key_id`, `nonce` and `ciphertext` columns (every token
    /// table stores them so); a missing column reads as empty, which no key opens.
    init(row: PostgresRow) {
        self.init(keyId: row.string("key_id") ?? "", nonce: row.bytes("nonce") ?? [], ciphertext: row.bytes("ciphertext") ?? [])
    }
}
