extension String {
    /// Whether any scalar is a control character (Unicode general category Cc: C0, DEL, C1), the
    /// test every free-text request value (usernames, login hints, query values) must pass.
    package var containsControlCharacter: Bool {
        unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}
