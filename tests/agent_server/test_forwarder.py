"""The forwarder over real loopback sockets: a real upstream server, a real client.

Nothing is mocked: the upstream is a small ASGI app served by uvicorn on 127.0.0.1:0
in the same event loop, recording every request it receives, and able to hold its
answer back after the first bytes so streaming can be observed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn

from agent_server.forwarder import CAPABILITY_PREFIX, Forwarder
from agent_server.redaction import Redactor

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
FIRST_EVENT = b'event: message_start\ndata: {"type":"message_start"}\n\n'
LAST_EVENT = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


@dataclass
class Upstream:
    """Records requests; streams FIRST_EVENT, waits for `release`, then LAST_EVENT."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    finished: bool = False

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
        headers = [(b"content-type", b"text/event-stream"), (b"x-request-id", b"req_1")]
        headers += [(k.encode(), v.encode()) for k, v in RATELIMIT.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": FIRST_EVENT, "more_body": True})
        await self.release.wait()
        await send({"type": "http.response.body", "body": LAST_EVENT, "more_body": False})
        self.finished = True


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


def run(scenario: Scenario, *, release_at_once: bool = True) -> Upstream:
    """Run `scenario` against a started upstream and forwarder; return the upstream."""

    async def main() -> Upstream:
        upstream = Upstream()
        if release_at_once:
            upstream.release.set()
        async with serving(upstream) as upstream_url:
            forwarder = Forwarder(upstream=upstream_url, redactor=Redactor())
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
