"""Browser tests: Debian's Chromium driven by Playwright against the live test server.

Never a downloaded browser: the tests launch /usr/bin/chromium (`apt-get install -y
chromium`). They skip only on a developer machine without it; under CI they fail.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from trinity.selectors import system_settings_get

# Playwright's sync API runs an event loop in this thread; Django would then refuse
# ORM calls from the test body, which are plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT_DIR = Path(settings.BASE_DIR) / "test-artifacts" / "screenshots"
# Every placeholder the panel shows while a read is in flight ("Loading agents…",
# "Loading usage…", the app's own "Loading…").
LOADING_TEXT = re.compile(r"^\s*Loading\b")
WIDTHS = {"desktop": (1280, 800), "phone": (390, 844)}

_screenshots_taken: list[Path] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _screenshots_taken:
        terminalreporter.write_sep("-", "browser screenshots")
        terminalreporter.write_line(f"{len(_screenshots_taken)} PNGs under {SCREENSHOT_DIR}")
        for path in _screenshots_taken:
            terminalreporter.write_line(f"  {path}")


# Package scope, not session: Playwright's sync API runs an event loop in this thread
# for as long as it is open, and every later test that calls asyncio.run would fail.
@pytest.fixture(scope="package")
def chromium() -> Iterator[Any]:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: `apt-get update && apt-get install -y chromium`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    index = settings.PANEL_DIST_DIR / "index.html"
    if not index.exists():
        pytest.fail(f"{index} is missing: run `cd frontend && npm ci && npm run build`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield browser
        browser.close()


@dataclass
class Panel:
    """One browser context on the live server, recording what the page received."""

    base_url: str
    context: Any
    page: Any
    responses: list[Any] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def goto(self, path: str = "/") -> None:
        self.page.goto(self.base_url + path)

    def open(self, page_id: str) -> None:
        self.page.get_by_role("navigation", name="Panel").get_by_role(
            "link", name=page_id.capitalize(), exact=True
        ).click()
        self.page.get_by_role("heading", level=1, name=page_id.capitalize()).wait_for()

    def sign_in(self, username: str, password: str) -> None:
        from playwright.sync_api import expect

        self.goto("/")
        self.page.get_by_label("Username").fill(username)
        self.page.get_by_label("Password").fill(password)
        self.page.get_by_role("button", name="Sign in").click()
        expect(self.page.get_by_test_id("signed-in-as")).to_contain_text(username)

    def resize(self, name: str) -> None:
        width, height = WIDTHS[name]
        self.page.set_viewport_size({"width": width, "height": height})

    def slow_network(self, *, latency_ms: int) -> None:
        """Add `latency_ms` to every request the page makes (Chromium's own throttling),
        so a step that does not wait for its data meets a page that is still loading."""
        cdp = self.context.new_cdp_session(self.page)
        cdp.send(
            "Network.emulateNetworkConditions",
            {
                "offline": False,
                "latency": latency_ms,
                "downloadThroughput": -1,
                "uploadThroughput": -1,
            },
        )

    def screenshot(self, name: str) -> Path:
        """Write a full-page PNG of what the page shows now.

        The caller first waits for the page's content; this refuses a page that still
        shows a loading placeholder, because a screenshot of one documents nothing.
        Loading starts only when the test acts (navigates, clicks), so none at this
        instant means none in the shot.
        """
        loading = self.page.get_by_text(LOADING_TEXT)
        assert loading.count() == 0, f"{name} is still loading: {loading.all_inner_texts()}"
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        width = self.page.viewport_size["width"]
        path = SCREENSHOT_DIR / f"{name}-{width}.png"
        self.page.screenshot(path=str(path), full_page=True)
        if path not in _screenshots_taken:
            _screenshots_taken.append(path)
        return path

    def received_text(self) -> str:
        """Every response body the page got (API calls, scripts, the page itself)."""
        bodies = []
        for response in self.responses:
            try:
                bodies.append(response.body().decode("utf-8", errors="replace"))
            except Exception:  # noqa: S112 - redirects and aborted loads carry no body
                continue
        return "\n".join(bodies)


@pytest.fixture
def panel(chromium: Any, live_server: Any, transactional_db: None) -> Iterator[Panel]:
    # The settings row is created on first read. Create it now, so the page's parallel
    # first reads don't race to insert it: the in-memory SQLite test database answers
    # that race with "table is locked" where Postgres would just retry.
    system_settings_get()
    context = chromium.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    context.set_default_timeout(10_000)
    page = context.new_page()
    panel = Panel(base_url=live_server.url, context=context, page=page)
    page.on("response", lambda response: panel.responses.append(response))
    page.on("pageerror", lambda error: panel.problems.append(f"page error: {error}"))

    def on_console(message: Any) -> None:
        # A 4xx the panel handles (a missing usage endpoint, /me before sign-in) is
        # logged by Chromium as "Failed to load resource"; anything else is a defect.
        if message.type == "error" and "Failed to load resource" not in message.text:
            panel.problems.append(f"console error: {message.text}")

    page.on("console", on_console)
    yield panel
    context.close()
    assert not panel.problems, panel.problems
