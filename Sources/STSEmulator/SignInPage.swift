import HTTPCommon

/// The emulator's sign-in page: what a person's browser sees at the authorize endpoint, as the
/// platform shows its own (pick an account or type one, see the permissions asked for, accept or
/// cancel). One form posts the authorize request's parameters back to the endpoint as hidden
/// fields, with `account` (picked), `login` (typed, wins when not empty) and `action`
/// (`accept` | `cancel`). Element ids are stable for browser tests: `account-N` (radio buttons),
/// `login`, `scopes`, `accept`, `cancel`, `error`.
struct SignInPage {
    /// The form's own fields: never carried over from the authorize request as hidden fields.
    static let choiceFields: Set<String> = ["account", "login", "action"]
    /// The platform's words for an account it does not know (AADSTS50034) and for none given.
    static let unknownAccount =
        "This username may be incorrect. Make sure you typed it correctly. Otherwise, contact your admin. (AADSTS50034)"
    static let noAccount = "Enter a valid email address, phone number, or Skype name."

    /// Where the form posts: the authorize path as requested.
    let action: String
    /// The authorize request's parameters, carried as hidden fields.
    let parameters: [(name: String, value: String)]
    let clientID: String
    /// The tenant (or B2C directory) the sign-in is at, as the authority named it.
    let directory: String
    /// Accounts offered to pick.
    let accounts: [String]
    /// The space-separated scopes asked for (shown as the permissions requested).
    let scopes: String

    /// The page as a 200 `text/html` answer.
    /// - Parameters:
    ///   - hint: the account to preselect (`login_hint`, or what was typed); typed into the
    ///     text field when it is none of ``accounts``.
    ///   - error: a message shown above the form (`role="alert"`), e.g. ``unknownAccount``.
    func response(hint: String?, error: String?) -> HTTPResponse {
        let picked = hint.flatMap { hint in accounts.firstIndex { $0.caseInsensitiveEquals(hint) } }
        let typed = picked == nil ? hint ?? "" : ""
        var html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Sign in to your account</title>
            <style>
            body { font-family: "Segoe UI", "DejaVu Sans", sans-serif; max-width: 30rem; margin: 2rem auto; padding: 0 1rem; color: #1b1b1b; }
            .banner { background: #fff4ce; padding: .5rem; font-size: .9rem; }
            fieldset { border: 1px solid #ccc; } label { display: block; margin: .4rem 0; }
            #error { color: #a80000; } button { margin-right: .5rem; padding: .4rem 1.2rem; }
            </style></head>
            <body>
            <p class="banner">Emulated Microsoft identity platform: test accounts only.</p>
            <h1>Sign in</h1>
            <p>to the application <code id="client">\(HTMLText.escape(clientID))</code> in <code id="tenant">\(HTMLText.escape(directory))</code></p>

            """
        if let error { html += "<p id=\"error\" role=\"alert\">\(HTMLText.escape(error))</p>\n" }
        html += "<form method=\"post\" action=\"\(HTMLText.escape(action))\">\n"
        for (name, value) in parameters {
            html += "<input type=\"hidden\" name=\"\(HTMLText.escape(name))\" value=\"\(HTMLText.escape(value))\">\n"
        }
        html += "<fieldset><legend>Pick an account</legend>\n"
        for (index, account) in accounts.enumerated() {
            let checked = index == picked ? " checked" : ""
            html += "<label><input type=\"radio\" name=\"account\" id=\"account-\(index)\" value=\"\(HTMLText.escape(account))\"\(checked)>"
            html += " \(HTMLText.escape(account))</label>\n"
        }
        html += """
            </fieldset>
            <label for="login">Or use another account</label>
            <input type="text" id="login" name="login" autocomplete="username" value="\(HTMLText.escape(typed))">
            <h2>Permissions requested</h2>
            <ul id="scopes">\(scopes.split(separator: " ").map { "<li>\(HTMLText.escape(String($0)))</li>" }.joined())</ul>
            <p>Accepting lets the application use these permissions for the account you sign in with.</p>
            <button type="submit" id="accept" name="action" value="accept">Accept</button>
            <button type="submit" id="cancel" name="action" value="cancel">Cancel</button>
            </form>
            </body></html>

            """
        return HTTPResponse(
            status: 200,
            headers: HTTPHeaders([
                ("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("X-Frame-Options", "DENY"),
            ]),
            body: Array(html.utf8))
    }
}
