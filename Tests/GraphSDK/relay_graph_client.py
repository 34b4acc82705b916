"""Microsoft's Graph SDK for Python (msgraph-sdk, pinned in scripts/python-tools) through TokenRelay.

Run by Tests/EndToEndTests/GraphSDKTests.swift: `python relay_graph_client.py CASE`, CASE one of
me, paging, send_mail, batch, cae. Environment: TR_BASE_URL (the relay), TR_API_KEY (a key with
downstream:call), TR_ACCOUNT_ID. Prints one JSON object with what the SDK saw; exits non-zero
naming what failed. Never prints the API key or a token.

The only relay-specific code is RelayAuthenticationProvider and the three lines that point the
SDK's request adapter at `{relay}/v1/downstream/graph` (the README shows the same).
"""
import asyncio
import json
import os
import sys
from urllib.parse import urlparse

from kiota_abstractions.api_error import APIError
from kiota_abstractions.authentication import AllowedHostsValidator, AuthenticationProvider
from kiota_abstractions.base_request_configuration import RequestConfiguration
from msgraph import GraphRequestAdapter, GraphServiceClient
from msgraph.generated.models.body_type import BodyType
from msgraph.generated.models.email_address import EmailAddress
from msgraph.generated.models.item_body import ItemBody
from msgraph.generated.models.message import Message
from msgraph.generated.models.recipient import Recipient
from msgraph.generated.users.item.messages.messages_request_builder import MessagesRequestBuilder
from msgraph.generated.users.item.send_mail.send_mail_post_request_body import SendMailPostRequestBody
from msgraph_core.requests.batch_request_content import BatchRequestContent
from msgraph_core.requests.batch_request_item import BatchRequestItem
from msgraph_core.tasks.page_iterator import PageIterator


class RelayAuthenticationProvider(AuthenticationProvider):
    """Adds TokenRelay's API key and the account to every request for the relay's host, and to
    nothing else (so a URL that points elsewhere never carries the key)."""

    def __init__(self, api_key: str, account_id: str, relay_host: str):
        self._headers = {"Authorization": f"Bearer {api_key}", "X-Account-Id": account_id}
        self._hosts = AllowedHostsValidator([relay_host])

    async def authenticate_request(self, request, additional_authentication_context=None):
        if self._hosts.is_url_host_valid(request.url):
            for name, value in self._headers.items():
                request.headers.try_add(name, value)


def relay_client() -> GraphServiceClient:
    relay = os.environ["TR_BASE_URL"].rstrip("/")
    auth = RelayAuthenticationProvider(os.environ["TR_API_KEY"], os.environ["TR_ACCOUNT_ID"], urlparse(relay).hostname)
    adapter = GraphRequestAdapter(auth)
    adapter.base_url = relay + "/v1/downstream/graph"
    return GraphServiceClient(request_adapter=adapter)


async def me(client):
    user = await client.me.get()
    return {"id": user.id, "user_principal_name": user.user_principal_name, "display_name": user.display_name}


async def paging(client):
    query = MessagesRequestBuilder.MessagesRequestBuilderGetQueryParameters(top=2)
    first = await client.me.messages.get(request_configuration=RequestConfiguration(query_parameters=query))
    subjects = []

    def collect(message):
        subjects.append(message.subject)
        return True  # keep iterating

    await PageIterator(first, client.request_adapter).iterate(collect)
    return {"subjects": subjects, "first_next_link": first.odata_next_link}


async def send_mail(client):
    body = SendMailPostRequestBody(
        message=Message(
            subject="Through the relay",
            body=ItemBody(content_type=BodyType.Text, content="Sent by msgraph-sdk through TokenRelay."),
            to_recipients=[Recipient(email_address=EmailAddress(address="bob@contoso.example"))]),
        save_to_sent_items=False)
    result = await client.me.send_mail.post(body)
    return {"sent": True, "result": result}


def batch_content(client) -> BatchRequestContent:
    content = BatchRequestContent({})
    requests = {
        "me": client.me.to_get_request_information(),
        "messages": client.me.messages.to_get_request_information(
            request_configuration=RequestConfiguration(
                query_parameters=MessagesRequestBuilder.MessagesRequestBuilderGetQueryParameters(top=1))),
    }
    for request_id, info in requests.items():
        item = BatchRequestItem(request_information=info, id=request_id)
        # msgraph-core 1.5.2 keeps the absolute URL in a batch item (msgraph-sdk-python issue
        # 1015), which Graph refuses; a batch wants URLs relative to the version root.
        item.url = item.url.removeprefix(client.request_adapter.base_url)
        content.add_request(request_id, item)
    return content


async def batch(client):
    content = batch_content(client)
    result = await client.batch.post(batch_request_content=content)
    # Kiota 1.16 drops a sub-response's inlined JSON body (kiota-python issue 737), so the
    # bodies are read from the same batch sent as raw bytes through the same adapter.
    raw_request = await client.batch.to_post_request_information(batch_content(client))
    raw = json.loads(await client.request_adapter.send_primitive_async(raw_request, "bytes", None))
    bodies = {item["id"]: item.get("body") for item in raw["responses"]}
    return {
        "statuses": {request_id: item.status for request_id, item in result.responses.items()},
        "urls": [item.url for item in content.requests.values()],
        "user_principal_name": (bodies.get("me") or {}).get("userPrincipalName"),
        "message_subjects": [m.get("subject") for m in (bodies.get("messages") or {}).get("value", [])],
    }


async def cae(client):
    try:
        await client.me.get()
    except APIError as error:
        # The SDK reads the problem as Graph's ODataError: its members land in additional_data,
        # except `error`, which the SDK takes for Graph's error object (type says the code).
        body = getattr(error, "additional_data", None) or {}
        return {
            "error_type": type(error).__name__,
            "is_api_error": True,
            "status": error.response_status_code,
            "problem": body,
            "www_authenticate": (error.response_headers or {}).get("www-authenticate"),
        }
    return {"error_type": None}


CASES = {"me": me, "paging": paging, "send_mail": send_mail, "batch": batch, "cae": cae}


def main():
    case = CASES.get(sys.argv[1] if len(sys.argv) > 1 else "")
    if case is None:
        print(f"usage: relay_graph_client.py {'|'.join(CASES)}", file=sys.stderr)
        sys.exit(2)
    try:
        result = asyncio.run(case(relay_client()))
    except APIError as error:
        print(f"{sys.argv[1]}: the SDK raised {type(error).__name__} with status {error.response_status_code}: {error.message}",
              file=sys.stderr)
        sys.exit(1)
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
