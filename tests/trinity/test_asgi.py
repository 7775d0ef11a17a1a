"""trinity/asgi.py: the web's ASGI application bounds the requests inside Django at
once (RequestSlots, WEB_THREADS per process), and an event stream gives its slot back
when it starts answering.

The wrapped application here is a small ASGI app of the test's own whose requests
wait on events the test sets: what is under test is the wrapper's accounting, and a
real Django view cannot be held at a chosen point. The real application under real
servers: tests/operations (gunicorn with deploy/gunicorn.conf.py) and bench/sse.py.
"""

from __future__ import annotations

import asyncio

import pytest

from trinity.asgi import Message, Receive, RequestSlots, Scope, Send, web_threads

STREAM = [(b"content-type", b"text/event-stream; charset=utf-8")]
JSON = [(b"content-type", b"application/json")]


class HeldApp:
    """Each request records that it entered, sends its headers, then waits for the
    test to let it finish."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.finish: dict[str, asyncio.Event] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = scope["path"]
        self.entered.append(name)
        self.finish[name] = asyncio.Event()
        headers = STREAM if name.startswith("/stream") else JSON
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await self.finish[name].wait()
        await send({"type": "http.response.body", "body": b""})


async def _receive() -> Message:
    return {"type": "http.request", "body": b""}


async def _send(message: Message) -> None:
    return None


def _request(slots: RequestSlots, path: str) -> asyncio.Task[None]:
    scope: Scope = {"type": "http", "path": path}
    return asyncio.ensure_future(slots(scope, _receive, _send))


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_requests_beyond_the_slots_wait_until_one_finishes() -> None:
    async def scenario() -> None:
        app = HeldApp()
        slots = RequestSlots(app, slots=2)
        tasks = [_request(slots, f"/api/{i}") for i in range(3)]
        await _settle()
        assert app.entered == ["/api/0", "/api/1"]
        app.finish["/api/0"].set()
        await _settle()
        assert app.entered == ["/api/0", "/api/1", "/api/2"]
        for name in ("/api/1", "/api/2"):
            app.finish[name].set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=5)

    asyncio.run(scenario())


def test_an_event_stream_gives_its_slot_back_when_it_starts_answering() -> None:
    async def scenario() -> None:
        app = HeldApp()
        slots = RequestSlots(app, slots=2)
        streams = [_request(slots, f"/stream/{i}") for i in range(10)]
        await _settle()
        # Ten streams open at once on two slots, and the API still gets in.
        api = _request(slots, "/api/agents")
        await _settle()
        assert "/api/agents" in app.entered
        assert sum(name.startswith("/stream") for name in app.entered) == 10
        for event in app.finish.values():
            event.set()
        await asyncio.wait_for(asyncio.gather(api, *streams), timeout=5)
        # Every slot is back: two held requests enter at once again.
        more = [_request(slots, f"/api/after-{i}") for i in range(2)]
        await _settle()
        assert app.entered[-2:] == ["/api/after-0", "/api/after-1"]
        for name in ("/api/after-0", "/api/after-1"):
            app.finish[name].set()
        await asyncio.wait_for(asyncio.gather(*more), timeout=5)

    asyncio.run(scenario())


def test_a_request_that_fails_gives_its_slot_back() -> None:
    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("the view failed")

    async def scenario() -> None:
        slots = RequestSlots(failing, slots=2)
        for _ in range(3):
            with pytest.raises(RuntimeError):
                await slots({"type": "http", "path": "/"}, _receive, _send)
        assert not slots._free.locked()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("raw", "slots"), [("", 32), (" ", 32), ("2", 2), ("64", 64), ("256", 256)]
)
def test_web_threads_reads_the_environment(raw: str, slots: int) -> None:
    assert web_threads({"WEB_THREADS": raw}) == slots


@pytest.mark.parametrize("raw", ["1", "257", "many", "-4"])
def test_a_bad_web_threads_stops_the_process_with_its_name(raw: str) -> None:
    with pytest.raises(RuntimeError, match="WEB_THREADS"):
        web_threads({"WEB_THREADS": raw})
