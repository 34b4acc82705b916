/// Text for HTML pages (the emulator's sign-in page, TokenRelay's pages for browsers).
public enum HTMLText {
    /// `text` with `&`, `<`, `>`, `"` and `'` as character references (HTML §13.1.4), safe in
    /// text and in quoted attribute values.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}
