"""The forwarder over real loopback sockets: a real upstream server, a real client.

Nothing is mocked: the upstream is a small ASGI app served by uvicorn on 127.0.0.1:0
in the same event loop, recording every request it receives, and able to hold its
answer back after the first bytes so streaming can be observed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import uvicorn

from agent_server.forwarder import CAPABILITY_PREFIX, Forwarder
from trinity_contract.redaction import Redactor

SECRET_OAT = "sk-ant-oat01-forwarder-test-aaaa"
SECRET_KEY = "sk-ant-api03-forwarder-test-bbbb"
RATELIMIT = {
    "anthropic-ratelimit-unified-status": "allowed",
    "anthropic-ratelimit-unified-5h-utilization": "0.25",
    "anthropic-ratelimit-unified-5h-reset": "1777608000",
    "anthropic-ratelimit-unified-5h-status": "allowed",
    "anthropic-ratelimit-unified-7d-utilization": "0.5",
    "anthropic-ratelimit-unified-7d-reset": "1777881600",
    "anthropic-ratelimit-unified-7d-status": "allowed",
}
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CODEX_PLAN = "eyJhbGciOiJSUzI1NiJ9.codex-plan-access-forwarder-test.c2ln"
OPENAI_KEY = "sk-proj-forwarder-test-openai-key-0000"
CODEX_RATELIMIT = {
    "x-codex-primary-used-percent": "12",
    "x-codex-primary-window-minutes": "300",
    "x-codex-primary-reset-at": "1777608000",
    "x-codex-secondary-used-percent": "40",
    "x-codex-secondary-window-minutes": "10080",
    "x-codex-secondary-reset-at": "1777881600",
}
FIRST_EVENT = b'event: message_start\ndata: {"type":"message_start"}\n\n'
LAST_EVENT = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


@dataclass
class Upstream:
    """Records requests; streams FIRST_EVENT, waits for `release`, then LAST_EVENT.

    Given a `refusal` (status, JSON body), it answers that instead, once per entry.
    """

    requests: list[dict[str, Any]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    finished: bool = False
    headers: dict[str, str] = field(default_factory=lambda: dict(RATELIMIT))
    refusals: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the body never arrived whole: no request was made
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.requests.append(
            {
                "method": scope["method"],
                "path": scope["path"],
                "query": scope["query_string"].decode(),
                "headers": {k.decode(): v.decode() for k, v in scope["headers"]},
                "body": body,
            }
        )
        if self.refusals:
            status, payload = self.refusals.pop(0)
            await _send_json(send, status, payload, self.headers)
            return
        headers = [(b"content-type", b"text/event-stream"), (b"x-request-id", b"req_1")]
        headers += [(k.encode(), v.encode()) for k, v in self.headers.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": FIRST_EVENT, "more_body": True})
        await self.release.wait()
        await send({"type": "http.response.body", "body": LAST_EVENT, "more_body": False})
        self.finished = True


async def _send_json(send: Any, status: int, payload: Any, headers: dict[str, str]) -> None:
    body = json.dumps(payload).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = _Server(uvicorn.Config(app, lifespan="off", log_config=None, access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.005)  # startup is a few event-loop turns
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


Scenario = Callable[[Upstream, Forwarder, httpx.AsyncClient], Awaitable[None]]


def run(
    scenario: Scenario, *, release_at_once: bool = True, upstream: Upstream | None = None
) -> Upstream:
    """Run `scenario` against a started upstream and forwarder; return the upstream.

    The one upstream stands for all three providers (Anthropic, the ChatGPT backend,
    the OpenAI API): which path a request reached says which one it was sent to.
    """

    async def main() -> Upstream:
        nonlocal upstream
        upstream = upstream or Upstream()
        if release_at_once:
            upstream.release.set()
        async with serving(upstream) as upstream_url:
            forwarder = Forwarder(
                upstream=upstream_url,
                codex_upstream=upstream_url,
                openai_upstream=upstream_url,
                redactor=Redactor(),
                clock=lambda: NOW,
            )
            await forwarder.start()
            try:
                async with httpx.AsyncClient(base_url=forwarder.base_url, timeout=10) as client:
                    await scenario(upstream, forwarder, client)
            finally:
                await forwarder.aclose()
        return upstream

    return asyncio.run(main())


def messages_body() -> dict[str, Any]:
    return {"model": "claude-sonnet-5-5", "max_tokens": 8, "stream": True, "messages": []}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": "Bearer wrong"},
        {"authorization": f"Bearer {CAPABILITY_PREFIX}"},
        {"authorization": f"Bearer {CAPABILITY_PREFIX}not-a-live-one"},
        {"x-api-key": f"{CAPABILITY_PREFIX}not-a-live-one"},
        {"authorization": f"Bearer {SECRET_OAT}"},  # the real secret is no capability
    ],
)
def test_a_request_without_a_live_capability_is_401_and_nothing_goes_upstream(
    headers: dict[str, str],
) -> None:
    answers: list[httpx.Response] = []

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape="bearer", secret=SECRET_OAT):
            answers.append(await client.post("/v1/messages", json=messages_body(), headers=headers))

    upstream = run(scenario)

    assert answers[0].status_code == 401
    assert answers[0].json()["error"]["type"] == "authentication_error"
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/messages"),
        ("POST", "/v1/models"),
        ("POST", "/api/oauth/usage"),
        ("POST", "/v1/messages/batches"),
        ("POST", "/"),
        ("PUT", "/v1/messages/count_tokens"),
    ],
)
def test_a_request_outside_the_allowlist_is_403_logged_and_never_forwarded(
    method: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    answers: list[httpx.Response] = []

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape="bearer", secret=SECRET_OAT) as grant:
            answers.append(
                await client.request(
                    method, path, headers={"authorization": f"Bearer {grant.capability}"}
                )
            )

    with caplog.at_level(logging.WARNING, logger="agent_server.forwarder"):
        upstream = run(scenario)

    assert answers[0].status_code == 403
    assert upstream.requests == []
    assert any(f"refused {method} {path}" in r.getMessage() for r in caplog.records)
    assert not any(SECRET_OAT in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("shape", "secret", "sent", "dropped"),
    [
        ("bearer", SECRET_OAT, ("authorization", f"Bearer {SECRET_OAT}"), "x-api-key"),
        ("x-api-key", SECRET_KEY, ("x-api-key", SECRET_KEY), "authorization"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_it_sends_the_real_credential_upstream_in_the_grants_shape_only(
    shape: Any, secret: str, sent: tuple[str, str], dropped: str, path: str
) -> None:
    answers: list[httpx.Response] = []

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape=shape, secret=secret) as grant:
            # Both headers carry the capability, as a confused client might send them:
            # upstream gets the credential once, in the grant's shape.
            answers.append(
                await client.post(
                    f"{path}?beta=true",
                    json=messages_body(),
                    headers={
                        "authorization": f"Bearer {grant.capability}",
                        "x-api-key": grant.capability,
                        "anthropic-beta": "oauth-2025-04-20",
                    },
                )
            )

    upstream = run(scenario)

    assert answers[0].status_code == 200
    assert answers[0].content == FIRST_EVENT + LAST_EVENT
    (request,) = upstream.requests
    assert (request["method"], request["path"], request["query"]) == ("POST", path, "beta=true")
    assert request["headers"][sent[0]] == sent[1]
    assert dropped not in request["headers"]
    assert request["headers"]["anthropic-beta"] == "oauth-2025-04-20"
    assert CAPABILITY_PREFIX not in str(request["headers"])
    assert request["body"] == httpx.Request("POST", "/", json=messages_body()).content


def test_a_capability_expires_with_its_turn() -> None:
    answers: list[httpx.Response] = []

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape="bearer", secret=SECRET_OAT) as grant:
            headers = {"authorization": f"Bearer {grant.capability}"}
            answers.append(await client.post("/v1/messages", json=messages_body(), headers=headers))
        answers.append(await client.post("/v1/messages", json=messages_body(), headers=headers))

    upstream = run(scenario)

    assert [a.status_code for a in answers] == [200, 401]
    assert len(upstream.requests) == 1


def test_each_turn_gets_its_own_capability_for_its_own_credential() -> None:
    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with (
            forwarder.grant(shape="bearer", secret=SECRET_OAT) as first,
            forwarder.grant(shape="x-api-key", secret=SECRET_KEY) as second,
        ):
            assert first.capability != second.capability
            await client.post("/v1/messages", json={}, headers={"x-api-key": second.capability})
            await client.post(
                "/v1/messages", json={}, headers={"authorization": f"Bearer {first.capability}"}
            )

    upstream = run(scenario)

    assert [r["headers"].get("x-api-key") for r in upstream.requests] == [SECRET_KEY, None]
    assert upstream.requests[1]["headers"]["authorization"] == f"Bearer {SECRET_OAT}"


def test_the_first_streamed_bytes_arrive_before_the_upstream_finished() -> None:
    seen_first: list[bytes] = []
    finished_then: list[bool] = []

    async def scenario(upstream: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape="bearer", secret=SECRET_OAT) as grant:
            async with client.stream(
                "POST",
                "/v1/messages",
                json=messages_body(),
                headers={"authorization": f"Bearer {grant.capability}"},
            ) as response:
                chunks = response.aiter_raw()
                seen_first.append(await asyncio.wait_for(anext(chunks), timeout=5))
                finished_then.append(upstream.finished)
                upstream.release.set()
                rest = b"".join([chunk async for chunk in chunks])
        seen_first.append(rest)

    upstream = run(scenario, release_at_once=False)

    assert seen_first == [FIRST_EVENT, LAST_EVENT]
    assert finished_then == [False]  # the first event came while upstream still held back
    assert upstream.finished


def test_it_keeps_the_unified_ratelimit_headers_of_the_answer_on_the_grant() -> None:
    kept: list[dict[str, str]] = []

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape="bearer", secret=SECRET_OAT) as grant:
            assert grant.ratelimit == {}
            response = await client.post(
                "/v1/messages",
                json=messages_body(),
                headers={"authorization": f"Bearer {grant.capability}"},
            )
            kept.append(dict(grant.ratelimit))
        # the client sees the headers too: the CLI reads them for its own limits
        assert response.headers["anthropic-ratelimit-unified-5h-utilization"] == "0.25"

    run(scenario)

    assert kept == [RATELIMIT]


def test_an_unreachable_upstream_is_a_502_in_the_messages_api_shape() -> None:
    async def main() -> httpx.Response:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{probe.getsockname()[1]}"  # bound, never listening
            forwarder = Forwarder(upstream=dead, redactor=Redactor())
            await forwarder.start()
            try:
                async with httpx.AsyncClient(base_url=forwarder.base_url) as client:
                    with forwarder.grant(shape="bearer", secret=SECRET_OAT) as grant:
                        return await client.post(
                            "/v1/messages",
                            json={},
                            headers={"authorization": f"Bearer {grant.capability}"},
                        )
            finally:
                await forwarder.aclose()

    response = asyncio.run(main())

    assert response.status_code == 502
    assert response.json()["error"]["type"] == "api_error"
    assert SECRET_OAT not in response.text


def test_a_request_body_over_the_limit_is_413_and_never_forwarded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("agent_server.forwarder.MAX_REQUEST_BYTES", 1024)
    answers: list[httpx.Response] = []

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape="bearer", secret=SECRET_OAT) as grant:
            answers.append(
                await client.post(
                    "/v1/messages",
                    content=b"x" * 4096,
                    headers={"authorization": f"Bearer {grant.capability}"},
                )
            )

    upstream = run(scenario)

    assert answers[0].status_code == 413
    assert upstream.requests == []


def test_a_streamed_body_that_outgrows_the_limit_is_413_and_never_reaches_upstream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("agent_server.forwarder.MAX_REQUEST_BYTES", 1024)
    answers: list[httpx.Response] = []

    async def chunked() -> AsyncIterator[bytes]:
        for _ in range(8):  # no content-length: only counting catches it
            yield b"x" * 512

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape="bearer", secret=SECRET_OAT) as grant:
            answers.append(
                await client.post(
                    "/v1/messages",
                    content=chunked(),
                    headers={"authorization": f"Bearer {grant.capability}"},
                )
            )

    upstream = run(scenario)

    assert answers[0].status_code == 413
    assert upstream.requests == []


def responses_body() -> dict[str, Any]:
    return {"model": "gpt-5.5-codex", "stream": True, "input": []}


@pytest.mark.parametrize(
    ("shape", "secret", "path"),
    [
        ("bearer", SECRET_OAT, "/v1/responses"),
        ("x-api-key", SECRET_KEY, "/v1/responses"),
        ("codex-plan", CODEX_PLAN, "/v1/messages"),
        ("openai-key", OPENAI_KEY, "/v1/messages"),
        ("codex-plan", CODEX_PLAN, "/v1/messages/count_tokens"),
    ],
)
def test_a_grant_never_reaches_the_other_providers_path(
    shape: Any, secret: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    answers: list[httpx.Response] = []

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape=shape, secret=secret, account_id="acct-1") as grant:
            answers.append(
                await client.post(
                    path, json={}, headers={"authorization": f"Bearer {grant.capability}"}
                )
            )

    with caplog.at_level(logging.WARNING, logger="agent_server.forwarder"):
        upstream = run(scenario)

    assert answers[0].status_code == 403
    assert upstream.requests == []
    assert any("not a path of the grant's provider" in r.getMessage() for r in caplog.records)
    assert not any(secret in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("shape", "secret", "account", "path", "sent_account"),
    [
        # a plan's token goes to the ChatGPT backend with its account, whatever the
        # client claimed the account was
        ("codex-plan", CODEX_PLAN, "acct-real", "/backend-api/codex/responses", "acct-real"),
        # a key goes to the platform API, with no account header at all
        ("openai-key", OPENAI_KEY, None, "/v1/responses", None),
    ],
)
def test_a_codex_grant_is_spent_in_its_own_shape_and_place(
    shape: Any, secret: str, account: str | None, path: str, sent_account: str | None
) -> None:
    answers: list[httpx.Response] = []

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape=shape, secret=secret, account_id=account) as grant:
            answers.append(
                await client.post(
                    "/v1/responses",
                    json=responses_body(),
                    headers={
                        "authorization": f"Bearer {grant.capability}",
                        "chatgpt-account-id": "acct-the-agent-chose",
                        "openai-organization": "org-the-agent-chose",
                        "originator": "codex_exec",
                    },
                )
            )

    upstream = run(scenario)

    assert answers[0].status_code == 200
    (request,) = upstream.requests
    assert (request["method"], request["path"]) == ("POST", path)
    assert request["headers"]["authorization"] == f"Bearer {secret}"
    assert request["headers"].get("chatgpt-account-id") == sent_account
    assert "openai-organization" not in request["headers"]
    assert request["headers"]["originator"] == "codex_exec"
    assert CAPABILITY_PREFIX not in str(request["headers"])
    assert request["body"] == httpx.Request("POST", "/", json=responses_body()).content


def test_it_keeps_the_codex_ratelimit_headers_of_the_answer_on_the_grant() -> None:
    kept: list[dict[str, str]] = []

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape="codex-plan", secret=CODEX_PLAN, account_id="a") as grant:
            await client.post(
                "/v1/responses",
                json=responses_body(),
                headers={"authorization": f"Bearer {grant.capability}"},
            )
            kept.append(dict(grant.ratelimit))

    run(scenario, upstream=Upstream(headers={**CODEX_RATELIMIT, "x-request-id": "r"}))

    assert kept == [CODEX_RATELIMIT]


def test_it_keeps_a_refusals_status_type_and_reset_redacted_and_a_success_clears_it() -> None:
    seen: list[Any] = []
    usage_limit = {
        "error": {
            "type": "usage_limit_reached",
            "message": f"You've hit your usage limit. ({OPENAI_KEY})",
            "resets_in_seconds": 3600,
        }
    }

    async def scenario(_: Upstream, forwarder: Forwarder, client: httpx.AsyncClient) -> None:
        with forwarder.grant(shape="openai-key", secret=OPENAI_KEY) as grant:
            headers = {"authorization": f"Bearer {grant.capability}"}
            refused = await client.post("/v1/responses", json=responses_body(), headers=headers)
            seen.append(refused.json())  # the CLI still gets the answer as it was
            seen.append(grant.seen.refusal)
            await client.post("/v1/responses", json=responses_body(), headers=headers)
            seen.append(grant.seen.refusal)

    upstream = Upstream(
        headers={"x-codex-primary-used-percent": "100"}, refusals=[(429, usage_limit)]
    )
    run(scenario, upstream=upstream)

    answer, refusal, after = seen
    assert answer == usage_limit
    assert refusal.status == 429
    assert refusal.error_type == "usage_limit_reached"
    assert refusal.reset == NOW + timedelta(seconds=3600)
    assert refusal.headers == {"x-codex-primary-used-percent": "100"}
    assert refusal.message.startswith("You've hit your usage limit.")
    assert OPENAI_KEY not in refusal.message  # the upstream quoted the key: kept masked
    assert after is None
