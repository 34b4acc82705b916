"""Microsoft Graph through TokenRelay with Microsoft's Graph SDK for Python (msgraph-sdk).

Runs as it is (the README quotes it; GraphSDKTests runs this very file against the emulator):

    pip install msgraph-sdk==1.65.0          # the versions scripts/python-tools pins were tested
    TR_BASE_URL=https://relay.example.com TR_API_KEY=trk_... TR_ACCOUNT_ID=acc_... python examples/graph_sdk.py

TR_API_KEY needs the `downstream:call` permission; TR_ACCOUNT_ID is an account signed in
through `POST /v1/sign-ins` (or its external id). The SDK needs no Azure credential: TokenRelay
holds the account's tokens and adds them to each call. Prints the signed-in user and the
subjects of their messages, page after page.
"""
import asyncio
import os
from urllib.parse import urlparse

from kiota_abstractions.authentication import AllowedHostsValidator, AuthenticationProvider
from msgraph import GraphRequestAdapter, GraphServiceClient
from msgraph_core.tasks.page_iterator import PageIterator


class RelayAuth(AuthenticationProvider):
    """Adds TokenRelay's API key and the account to each request for the relay's host only."""

    def __init__(self, api_key, account_id, relay_host):
        self.headers = {"Authorization": f"Bearer {api_key}", "X-Account-Id": account_id}
        self.hosts = AllowedHostsValidator([relay_host])  # the key goes to the relay only

    async def authenticate_request(self, request, additional_authentication_context=None):
        if self.hosts.is_url_host_valid(request.url):
            for name, value in self.headers.items():
                request.headers.try_add(name, value)


async def main():
    relay = os.environ["TR_BASE_URL"].rstrip("/")
    api_key, account_id = os.environ["TR_API_KEY"], os.environ["TR_ACCOUNT_ID"]
    adapter = GraphRequestAdapter(RelayAuth(api_key, account_id, urlparse(relay).hostname))
    adapter.base_url = relay + "/v1/downstream/graph"  # before the client is made
    graph = GraphServiceClient(request_adapter=adapter)

    me = await graph.me.get()
    print(f"signed in: {me.user_principal_name}")

    # Graph's @odata.nextLink comes back pointing at the relay, so the SDK's page iterator
    # fetches every page through it.
    first = await graph.me.messages.get()

    def show(message):
        print(f"message: {message.subject}")
        return True  # go on to the next one

    await PageIterator(first, graph.request_adapter).iterate(show)


if __name__ == "__main__":
    asyncio.run(main())
