"""The headers a request carries upstream: the client's credential and hop-by-hop
headers never cross, the rung's credential goes in its provider's form."""

from __future__ import annotations

from gateway.server.upstream import OAUTH_BETA, Upstreams, request_headers
from routing.rung import Rung, RungKind
from trinity.crypto import Secret

CLIENT = [
    (b"host", b"gateway.example"),
    (b"x-api-key", b"trinity-gw-the-persons-key"),
    (b"authorization", b"Bearer trinity-gw-the-persons-key"),
    (b"connection", b"keep-alive"),
    (b"content-length", b"123"),
    (b"accept-encoding", b"br"),
    (b"anthropic-beta", b"prompt-caching-2024-07-31"),
    (b"anthropic-version", b"2023-06-01"),
    (b"chatgpt-account-id", b"acct-the-client-chose"),
]


def names(headers: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    return {n.lower(): v for n, v in headers}


def test_a_plan_token_goes_as_bearer_with_the_oauth_beta_and_nothing_of_the_clients() -> None:
    rung = Rung(RungKind.SUBSCRIPTION, Secret("sk-ant-oat01-plan"), 1, "max-a")
    sent = names(request_headers(CLIENT, rung))
    assert sent[b"authorization"] == b"Bearer sk-ant-oat01-plan"
    assert b"x-api-key" not in sent and b"host" not in sent and b"connection" not in sent
    assert b"content-length" not in sent and b"chatgpt-account-id" not in sent
    assert sent[b"anthropic-beta"] == b"prompt-caching-2024-07-31," + OAUTH_BETA.encode()
    assert sent[b"accept-encoding"] == b"identity"  # metering reads what it relays
    assert sent[b"anthropic-version"] == b"2023-06-01"
    assert b"trinity-gw-" not in b"".join(v for _, v in request_headers(CLIENT, rung))


def test_the_platform_key_goes_as_x_api_key() -> None:
    rung = Rung(RungKind.API_KEY, Secret("sk-ant-api03-key"))
    sent = names(request_headers(CLIENT, rung))
    assert sent[b"x-api-key"] == b"sk-ant-api03-key" and b"authorization" not in sent


def test_a_codex_plan_goes_to_the_backend_with_its_own_account() -> None:
    rung = Rung(
        RungKind.SUBSCRIPTION, Secret("eyJ.plan.token"), 2, "gpt-a", "openai-codex", "acct-2"
    )
    sent = names(request_headers(CLIENT, rung))
    assert sent[b"chatgpt-account-id"] == b"acct-2"
    upstreams = Upstreams("https://a.example", "https://chatgpt.example", "https://o.example")
    assert (
        upstreams.url(rung, "/v1/responses")
        == "https://chatgpt.example/backend-api/codex/responses"
    )
    key = Rung(RungKind.API_KEY, Secret("sk-proj-x"), provider="openai-codex")
    assert upstreams.url(key, "/v1/responses") == "https://o.example/v1/responses"
