"""Sign-in (followed with wait) -> silent token -> Graph through a client generated from openapi.yaml.

Run by Tests/EndToEndTests/GeneratedClientTests.swift after `openapi-python-client generate`
wrote the package `tokenrelay_client` into the directory given as argv[1]. Environment:
TR_BASE_URL, TR_API_KEY, TR_USERNAME. Exits non-zero naming the first contract mismatch; never
prints a token.
"""
import os
import sys
import threading
import urllib.request

import httpx
import urllib.error

sys.path.insert(0, sys.argv[1])

from tokenrelay_client import AuthenticatedClient, Client  # noqa: E402
from tokenrelay_client.api.sign_in import create_sign_in, complete_sign_in, get_sign_in  # noqa: E402
from tokenrelay_client.api.tokens import acquire_token_silent  # noqa: E402
from tokenrelay_client.api.accounts import get_account  # noqa: E402
from tokenrelay_client.api.downstream import call_downstream  # noqa: E402
from tokenrelay_client.api.downstream import call_downstream_encoded, call_downstream_encoded_post  # noqa: E402
from tokenrelay_client.models import (  # noqa: E402
    SignIn, SignInCreated, SignInRequest, SignInResult, SilentTokenRequest, TokenResponse, Account, Problem, DownstreamJSONBody)


def fail(message):
    print(f"contract mismatch: {message}", file=sys.stderr)
    sys.exit(1)


def expect(response, status, model, what):
    if response.status_code != status:
        fail(f"{what}: HTTP {response.status_code}, expected {status}: {response.content[:300]!r}")
    if not isinstance(response.parsed, model):
        fail(f"{what}: the generated client parsed {type(response.parsed).__name__}, expected {model.__name__}")
    return response.parsed


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


base_url = os.environ["TR_BASE_URL"]
api = AuthenticatedClient(base_url=base_url, token=os.environ["TR_API_KEY"], raise_on_unexpected_status=True)
anonymous = Client(base_url=base_url, raise_on_unexpected_status=True)

# 1. Sign in: create the sign-in, let the (emulated) browser visit the authority, which answers
#    302 to the redirect URI with code and state; complete it through the generated client.
created = expect(
    create_sign_in.sync_detailed(client=api, body=SignInRequest(scopes=["User.Read"], login_hint=os.environ["TR_USERNAME"])),
    201, SignInCreated, "POST /v1/sign-ins")
pending = expect(get_sign_in.sync_detailed(created.sign_in_id, client=api, wait=0), 200, SignIn, "GET /v1/sign-ins/{id}")
if pending.status != "pending":
    fail(f"a new sign-in reads {pending.status}, expected pending")
# The caller follows the sign-in with a long poll while the user is at the authority.
followed = {}
follower = threading.Thread(
    target=lambda: followed.update(response=get_sign_in.sync_detailed(created.sign_in_id, client=api.with_timeout(httpx.Timeout(40.0)), wait=30)))
follower.start()
try:
    urllib.request.build_opener(NoRedirect).open(created.authorize_url)
    fail("the authority did not redirect back")
except urllib.error.HTTPError as redirect:
    if redirect.code != 302:
        fail(f"authorize answered {redirect.code}")
    location = redirect.headers["Location"]
from urllib.parse import urlparse, parse_qs  # noqa: E402
query = parse_qs(urlparse(location).query)
result = expect(
    complete_sign_in.sync_detailed(client=anonymous, code=query["code"][0], state=query["state"][0]),
    200, SignInResult, "GET /v1/sign-ins/callback")
account_id = result.account.account_id
if result.account.username.lower() != os.environ["TR_USERNAME"].lower():
    fail("the signed-in account has another username")
follower.join(40)
if follower.is_alive() or "response" not in followed:
    fail("GET /v1/sign-ins/{id}?wait=30 did not answer")
outcome = expect(followed["response"], 200, SignIn, "GET /v1/sign-ins/{id}?wait=30")
if outcome.status != "completed" or outcome.account_id != account_id or outcome.created is not True:
    fail(f"the followed sign-in reads {outcome.status}, account {outcome.account_id}, created {outcome.created}")

# 2. The account reads back; a silent token comes from the cache the sign-in filled.
account = expect(get_account.sync_detailed(account_id, client=api), 200, Account, "GET /v1/accounts/{id}")
if account.account_id != account_id:
    fail("GET /v1/accounts/{id} answered another account")
token = expect(
    acquire_token_silent.sync_detailed(client=api, body=SilentTokenRequest(account_id=account_id, scopes=["User.Read"])),
    200, TokenResponse, "POST /v1/tokens/silent")
if token.token_type != "Bearer" or not token.access_token or "User.Read" not in token.scopes:
    fail("the token answer lacks token_type Bearer, access_token or scope User.Read")

# 3. A token request that must fail comes back as the documented Problem.
missing = expect(
    acquire_token_silent.sync_detailed(client=api, body=SilentTokenRequest(account_id="no-such-account", scopes=["User.Read"])),
    404, Problem, "POST /v1/tokens/silent (unknown account)")
if missing.error != "account_not_found":
    fail(f"unknown account answered error={missing.error}")

# 4. Graph /me through the relay: the relayed body is the API's own. openapi.yaml declares it
#    as `*/*` (any media type), which the generator leaves unparsed, so this call does not
#    raise on a status it has no model for.
relay = AuthenticatedClient(base_url=base_url, token=os.environ["TR_API_KEY"], raise_on_unexpected_status=False)
me = call_downstream.sync_detailed("graph", "me", client=relay, x_account_id=account_id)
if me.status_code != 200 or me.headers.get("TokenRelay-Relayed") != "true":
    fail(f"GET /v1/downstream/graph/me: HTTP {me.status_code}")
import json  # noqa: E402
if json.loads(me.content).get("userPrincipalName", "").lower() != os.environ["TR_USERNAME"].lower():
    fail("Graph /me answered another user")

# 5. Every route through the generated client (issue 29 item 2): the client percent-encodes its
#    path parameter, `/` included, so it calls /v1/downstream-encoded/{api}/{path}, where the
#    relay decodes {path} once. me, me/messages (paged), sendMail, and an id holding an encoded
#    `/` (the value holds `%2F`; the client sends `%252F`; Graph gets `%2F` inside the segment).
def relayed(response, status, what):
    if response.status_code != status or response.headers.get("TokenRelay-Relayed") != "true":
        fail(f"{what}: HTTP {response.status_code} (relayed: {response.headers.get('TokenRelay-Relayed')}), expected a relayed {status}: "
             f"{response.content[:300]!r}")
    return json.loads(response.content) if response.content else None


me = relayed(call_downstream_encoded.sync_detailed("graph", "me", client=relay, x_account_id=account_id), 200, "encoded me")
if me.get("userPrincipalName", "").lower() != os.environ["TR_USERNAME"].lower():
    fail("encoded me answered another user")
subjects = [f"m{n}" for n in range(1, 13)]
for subject in subjects:
    relayed(call_downstream_encoded_post.sync_detailed(
        "graph", "me/messages", client=relay, x_account_id=account_id, body=DownstreamJSONBody.from_dict({"subject": subject})),
        201, "encoded POST me/messages")
page = relayed(call_downstream_encoded.sync_detailed("graph", "me/messages", client=relay, x_account_id=account_id), 200,
               "encoded me/messages")
seen = [message["subject"] for message in page["value"]]
pages = 1
while page.get("@odata.nextLink"):
    link = page["@odata.nextLink"]
    if not link.startswith(base_url + "/v1/downstream/graph/me/messages?"):
        fail(f"the next page's link does not point at the relay: {link}")
    # The rewritten link is a plain URL: the generated client's own HTTP client (base URL,
    # API key) follows it as it is.
    following = relay.get_httpx_client().get(link, headers={"X-Account-Id": account_id})
    if following.status_code != 200:
        fail(f"next page: HTTP {following.status_code}")
    page = following.json()
    seen += [message["subject"] for message in page["value"]]
    pages += 1
if seen != subjects or pages != 2:
    fail(f"me/messages paged: {pages} pages, subjects {seen}")
mail = DownstreamJSONBody.from_dict({"message": {"subject": "hello", "toRecipients": [{"emailAddress": {"address": "bob@contoso.example"}}]}})
relayed(call_downstream_encoded_post.sync_detailed("graph", "me/sendMail", client=relay, x_account_id=account_id, body=mail), 202,
        "encoded POST me/sendMail")
# An id holding an encoded `/`: Graph answers 404 (no such user), with its own JSON error, which
# the generated parser would read as a Problem (a relayed 404 and TokenRelay's own share the
# status): the request the generated client builds is sent by its own HTTP client and the answer
# read as it is. The Swift test checks the path Graph was asked for.
request = call_downstream_encoded._get_kwargs("graph", "users/alice@contoso.example%2Fx", x_account_id=account_id)
if request["url"] != "/v1/downstream-encoded/graph/users%2Falice%40contoso.example%252Fx":
    fail(f"the generated client encodes the path otherwise: {request['url']}")
relayed(relay.get_httpx_client().request(**request), 404, "encoded users/{id with %2F}")
print("generated client flow: ok")
