"""A person's sign-in in a real browser (issue 29): Debian's chromium, headless, driven by
Selenium (PyPI, pinned in scripts/python-tools) through Debian's chromedriver, against a real
stack (PostgreSQL, the emulator, `token-relay serve`). Run by
Tests/EndToEndTests/BrowserSignInTests.swift as `python browser_sign_in.py CASE`.

Cases:
  flow    POST /v1/sign-ins, the emulator's sign-in page (pick an account, type an unknown then
          a known one, accept), redirect_after; a dead refresh token's interaction_required
          problem, its sign_in_url followed to recovery, the used link's page; a cancel and its
          page's way back to redirect_after; problem+json for API callers on the same URL.
  broken  expects a sign-in page behind a tampered link (a 403 page): fails on purpose, so the
          Swift test can check that a failing page leaves its screenshot.

Environment: TR_BASE_URL, TR_API_KEY, TR_EMULATOR_URL, TR_LANDING_URL (an origin of
TOKENRELAY_REDIRECT_AFTER_ORIGINS serving a page), TR_SCREENSHOT_DIR; TR_CHROMIUM and
TR_CHROMEDRIVER (default Debian's /usr/bin/chromium and /usr/bin/chromedriver). Prints
"browser sign-in: ok"; on a failure writes a PNG of each page it saw (and the last page's HTML)
to TR_SCREENSHOT_DIR, names them and the failure, and exits 1. Never prints a token or a key.
"""
import json
import os
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

BASE = os.environ["TR_BASE_URL"]
KEY = os.environ["TR_API_KEY"]
EMULATOR = os.environ["TR_EMULATOR_URL"]
LANDING = os.environ["TR_LANDING_URL"]
SHOTS = os.environ["TR_SCREENSHOT_DIR"]
ALICE, BOB = "alice@contoso.example", "bob@contoso.example"


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def call(method, url, body=None, headers=None, key=True):
    """(status, headers, body bytes) of one request; no redirects followed."""
    headers = dict(headers or {})
    if key:
        headers["Authorization"] = "Bearer " + KEY
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        response = urllib.request.build_opener(NoRedirect).open(urllib.request.Request(url, data=data, headers=headers, method=method), timeout=30)
        return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def api(method, path, body=None, expect=200):
    status, _, content = call(method, BASE + path, body)
    check(status == expect, f"{method} {path}: HTTP {status}, expected {expect}: {content[:300]!r}")
    return json.loads(content) if content else {}


class Browser:
    """Headless chromium with a screenshot of every page it was asked to look at."""

    def __init__(self):
        options = webdriver.ChromeOptions()
        options.binary_location = os.environ.get("TR_CHROMIUM", "/usr/bin/chromium")
        # --no-sandbox: chromium refuses to run as root with its sandbox (CI runs as root), and
        # containers often lack the user namespaces the sandbox needs.
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                         "--no-proxy-server", "--disable-extensions", "--window-size=1000,900", "--lang=en-US",
                         "--user-data-dir=" + tempfile.mkdtemp(prefix="tokenrelay-chromium-")):
            options.add_argument(argument)
        service = Service(executable_path=os.environ.get("TR_CHROMEDRIVER", "/usr/bin/chromedriver"))
        self.driver = webdriver.Chrome(service=service, options=options)
        self.driver.set_page_load_timeout(30)
        self.shots = []

    def shot(self, name):
        self.shots.append((f"{len(self.shots) + 1:02d}-{name}", self.driver.get_screenshot_as_png()))

    def open(self, url, name):
        self.driver.get(url)
        self.shot(name)

    def click(self, element_id, name, until):
        self.driver.find_element(By.ID, element_id).click()
        WebDriverWait(self.driver, 20).until(until)
        self.shot(name)

    def text(self, element_id):
        found = self.driver.find_elements(By.ID, element_id)
        return found[0].text if found else None

    def title(self):
        return self.driver.title

    def url(self):
        return self.driver.current_url

    def save(self):
        """Every page seen as PNG, and the last one's HTML, under SHOTS; returns the paths."""
        os.makedirs(SHOTS, exist_ok=True)
        paths = []
        try:
            self.shot("at-failure")
        except Exception:  # the browser may be gone
            pass
        for name, png in self.shots:
            path = os.path.join(SHOTS, name + ".png")
            with open(path, "wb") as handle:
                handle.write(png)
            paths.append(path)
        try:
            path = os.path.join(SHOTS, "last-page.html")
            with open(path, "w") as handle:
                handle.write(self.driver.page_source)
            paths.append(path)
        except Exception:
            pass
        return paths


def left_page(url):
    return lambda driver: not driver.current_url.startswith(url)


def on_sign_in_page(browser, what):
    check(browser.title() == "Sign in to your account", f"{what}: not the sign-in page but {browser.title()!r} at {browser.url()}")
    check(browser.driver.find_element(By.ID, "accept").is_displayed(), f"{what}: no Accept button")


def flow(browser):
    # 1. A sign-in through the page: alice preselected by login_hint, consent, back to redirect_after.
    started = api("POST", "/v1/sign-ins", {"scopes": ["User.Read"], "login_hint": ALICE, "redirect_after": LANDING + "/signed-in?from=browser"},
                  expect=201)
    browser.open(started["authorize_url"], "sign-in-page")
    on_sign_in_page(browser, "authorize_url")
    picked = [e.get_attribute("value") for e in browser.driver.find_elements(By.CSS_SELECTOR, "input[name=account]:checked")]
    check(picked == [ALICE], f"login_hint preselects {ALICE}, not {picked}")
    check("User.Read" in browser.text("scopes"), f"the page lists the permissions asked: {browser.text('scopes')!r}")
    browser.click("accept", "landed-after-sign-in", lambda d: d.current_url.startswith(LANDING))
    landed = urllib.parse.urlsplit(browser.url())
    query = urllib.parse.parse_qs(landed.query)
    check(landed.path == "/signed-in" and query.get("from") == ["browser"], f"redirect_after kept its path and query: {browser.url()}")
    check(len(query.get("account_id", [])) == 1, f"redirect_after got one account_id: {browser.url()}")
    alice = query["account_id"][0]
    account = api("GET", "/v1/accounts/" + alice)
    check(account["username"] == ALICE and account["state"] == "active", f"alice's account: {account}")

    # 2. Another account typed: an unknown one is refused on the page, a known one signs in; no
    #    redirect_after, so the callback shows a page of its own, not JSON.
    started = api("POST", "/v1/sign-ins", {"scopes": ["User.Read"]}, expect=201)
    browser.open(started["authorize_url"], "sign-in-page-no-hint")
    on_sign_in_page(browser, "authorize_url without login_hint")
    browser.driver.find_element(By.ID, "login").send_keys("nobody@contoso.example")
    browser.click("accept", "unknown-account", lambda d: d.find_elements(By.ID, "error"))
    check("AADSTS50034" in (browser.text("error") or ""), f"an unknown account is refused on the page: {browser.text('error')!r}")
    login = browser.driver.find_element(By.ID, "login")
    login.clear()
    login.send_keys(BOB)
    browser.click("accept", "signed-in-page", left_page(EMULATOR))
    check(browser.url().startswith(BASE + "/v1/sign-ins/callback"), f"back at the callback: {browser.url()}")
    check(browser.text("username") == BOB, f"the signed-in page names bob: {browser.driver.page_source[:400]!r}")
    check((browser.text("account-id") or "").startswith("acc_"), "the signed-in page shows the account id")

    # 3. alice's refresh token dies: the silent token is 409 interaction_required with a
    #    sign_in_url; the browser follows it, signs in, and the account recovers.
    call("POST", EMULATOR + f"/_control/users/{ALICE}", {"revoke_refresh_tokens": True}, key=False)
    status, _, content = call("POST", BASE + "/v1/tokens/silent", {"account_id": alice, "scopes": ["User.Read"], "force_refresh": True})
    problem = json.loads(content)
    check(status == 409 and problem.get("error") == "interaction_required", f"a dead refresh token: HTTP {status} {problem.get('error')}")
    link = problem.get("sign_in_url", "")
    check(link.startswith(BASE + "/v1/sign-ins/start?"), f"the problem carries a sign_in_url: {link[:80]!r}")
    check(api("GET", "/v1/accounts/" + alice)["state"] == "interaction_required", "the account waits for its user")
    browser.open(link, "sign-in-page-from-sign_in_url")
    on_sign_in_page(browser, "sign_in_url")
    picked = [e.get_attribute("value") for e in browser.driver.find_elements(By.CSS_SELECTOR, "input[name=account]:checked")]
    check(picked == [ALICE], f"the sign_in_url's login_hint preselects alice: {picked}")
    browser.click("accept", "recovered", left_page(EMULATOR))
    check(browser.text("account-id") == alice, f"the same account signed in again: {browser.text('account-id')!r}")
    check(api("GET", "/v1/accounts/" + alice)["state"] == "active", "the account recovered")
    api("POST", "/v1/tokens/silent", {"account_id": alice, "scopes": ["User.Read"]})

    # 4. The used link again: a readable page saying so, not JSON.
    browser.open(link, "used-link")
    check(browser.text("error") == "forbidden", f"a used link's page names the error: {browser.driver.page_source[:400]!r}")
    check("used already" in (browser.text("detail") or ""), f"and says why: {browser.text('detail')!r}")

    # 5. Cancel: the callback's page says so and leads back to redirect_after with the error.
    started = api("POST", "/v1/sign-ins", {"scopes": ["User.Read"], "login_hint": ALICE, "redirect_after": LANDING + "/after"}, expect=201)
    browser.open(started["authorize_url"], "sign-in-page-to-cancel")
    on_sign_in_page(browser, "authorize_url to cancel")
    browser.click("cancel", "canceled-page", left_page(EMULATOR))
    check(browser.url().startswith(BASE + "/v1/sign-ins/callback"), f"back at the callback: {browser.url()}")
    check(browser.text("error") == "user_canceled", f"the page names user_canceled: {browser.driver.page_source[:400]!r}")
    canceled = browser.url()
    browser.click("return", "landed-after-cancel", lambda d: d.current_url.startswith(LANDING))
    landed = urllib.parse.urlsplit(browser.url())
    check(landed.path == "/after" and urllib.parse.parse_qs(landed.query) == {"error": ["user_canceled"]},
          f"the way back is redirect_after with error=user_canceled: {browser.url()}")

    # 6. API callers of the same URLs keep problem+json; a browser's Accept gets HTML.
    for accept, media in ((None, "application/problem+json"), ("application/json", "application/problem+json"),
                          ("text/html,application/xhtml+xml,*/*;q=0.8", "text/html")):
        status, headers, _ = call("GET", canceled, headers={"Accept": accept} if accept else {}, key=False)
        check(status == 400 and headers.get("Content-Type", "").startswith(media),
              f"Accept {accept}: HTTP {status} {headers.get('Content-Type')}, expected 400 {media}")
        status, headers, _ = call("GET", link, headers={"Accept": accept} if accept else {}, key=False)
        check(status == 403 and headers.get("Content-Type", "").startswith(media),
              f"used link, Accept {accept}: HTTP {status} {headers.get('Content-Type')}, expected 403 {media}")


def broken(browser):
    started = api("POST", "/v1/sign-ins", {"scopes": ["User.Read"]}, expect=201)
    browser.open(started["authorize_url"], "sign-in-page")
    on_sign_in_page(browser, "authorize_url")
    browser.open(BASE + "/v1/sign-ins/start?scopes=User.Read&expires=1&nonce=x&sig=tampered", "tampered-link")
    on_sign_in_page(browser, "a tampered link (fails on purpose)")


def main():
    case = sys.argv[1] if len(sys.argv) > 1 else "flow"
    browser = Browser()
    try:
        {"flow": flow, "broken": broken}[case](browser)
    except Exception as failure:  # a Failure, or Selenium's own (a timeout, a missing element)
        paths = browser.save()
        print(f"browser sign-in failed: {type(failure).__name__}: {failure}", file=sys.stderr)
        print("pages seen: " + ", ".join(paths), file=sys.stderr)
        return 1
    finally:
        browser.driver.quit()
    print("browser sign-in: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
