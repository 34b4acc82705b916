extension String {
    /// Whether any scalar is a control character (Unicode general category Cc: C0, DEL, C1), the
    /// test every free-text request value (usernames, login hints, query values) must pass.
    package var containsControlCharacter: Bool {
        unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// Whether any scalar is a bidirectional formatting character (Unicode property Bidi_Control,
    /// UAX #9: the embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069, and the
    /// marks U+061C, U+200E and U+200F). Each reorders how the text around it is shown, so a name
    /// holding one can read as another name in a list or an audit row ("Trojan Source",
    /// CVE-2021-42574): refused in the names people read (API key names, usernames, login hints).
    package var containsBidiControl: Bool {
        unicodeScalars.contains { $0.properties.isBidiControl }
    }
}
