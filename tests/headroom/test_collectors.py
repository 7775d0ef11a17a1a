"""The provider collectors against the real simulator, over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from pytest_django.fixtures import Settings

from routing.headroom.reading import ReadingStatus
from simulator.control import SimulatorControl
from subscriptions.headroom import collectors
from subscriptions.headroom.collectors import anthropic, common, openai_codex
from tests.headroom.factories import served
from tests.headroom.readings import T0
from trinity.crypto import Secret

OAUTH = "sk-ant-oat01-headroom-collector-0000-aaaa"
API_KEY = "sk-ant-api03-headroom-collector-0000-kkkk"
CODEX = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJoZWFkcm9vbSJ9.c2lnbmF0dXJlLWNvZGV4"


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with collectors.http_client(timeout=5, max_connections=2) as http:
        yield http


def _paths(sim: SimulatorControl) -> list[tuple[str, str, int]]:
    return [(r["method"], r["path"], r["status"]) for r in served(sim)]


class TestAnthropic:
    def test_the_usage_endpoint_is_read_first_and_spends_no_quota(
        self, sim: SimulatorControl, client: httpx.Client
    ) -> None:
        sim.register(OAUTH, kind="oauth", label="plan-a")
        sim.set_usage(OAUTH, "five_hour", percent=42)
        sim.set_usage(OAUTH, "seven_day_sonnet", percent=7.5)

        reading = collectors.read(
            provider="anthropic", token=Secret(OAUTH), client=client, now=T0
        ).reading

        assert reading.status is ReadingStatus.OK
        assert reading.source == "usage"
        assert reading.fetched_at == T0
        five_hour = reading.windows["five_hour"]
        assert (five_hour.utilization, five_hour.resets_at, five_hour.status) == (
            42.0,
            T0 + timedelta(hours=5),
            "allowed",
        )
        assert reading.windows["seven_day"].utilization == 0.0
        assert reading.windows["seven_day"].resets_at is None
        assert reading.windows["seven_day_sonnet"].utilization == 7.5
        assert _paths(sim) == [("GET", "/api/oauth/usage", 200)]

    def test_a_full_window_on_the_usage_endpoint_reads_as_rate_limited(
        self, sim: SimulatorControl, client: httpx.Client
    ) -> None:
        sim.register(OAUTH, kind="oauth", label="plan-a")
        sim.set_usage(OAUTH, "seven_day", percent=100)

        reading = anthropic.read(token=Secret(OAUTH), client=client, now=T0).reading

        assert reading.status is ReadingStatus.RATE_LIMITED
        assert reading.windows["seven_day"].status == "rejected"
        assert reading.reset_at == T0 + timedelta(days=7)

    def test_without_the_usage_scope_it_probes_and_parses_the_unified_headers(
        self, sim: SimulatorControl, client: httpx.Client
    ) -> None:
        sim.register(OAUTH, kind="oauth", label="plan-a")
        sim.set_usage_scope(OAUTH, allowed=False)
        sim.set_usage(OAUTH, "five_hour", percent=42.34)
        sim.set_usage(OAUTH, "seven_day", percent=85)

        reading = anthropic.read(token=Secret(OAUTH), client=client, now=T0).reading

        assert reading.status is ReadingStatus.OK
        assert reading.source == "probe"
        five_hour, seven_day = reading.windows["five_hour"], reading.windows["seven_day"]
        assert (five_hour.utilization, five_hour.status) == (42.3, "allowed")
        assert five_hour.resets_at == T0 + timedelta(hours=5)
        assert five_hour.resets_at.tzinfo is not None
        assert (seven_day.utilization, seven_day.status) == (85.0, "allowed_warning")
        assert seven_day.resets_at == T0 + timedelta(days=7)
        assert reading.representative_claim == "seven_day"
        assert reading.overage_status == "rejected"
        requests = served(sim)
        assert [(r["method"], r["path"], r["status"]) for r in requests] == [
            ("GET", "/api/oauth/usage", 403),
            ("POST", "/v1/messages", 200),
        ]
        assert requests[1]["model"] == "claude-haiku-4-5"
        assert requests[1]["auth_kind"] == "oauth"

    def test_a_429_probe_is_rate_limited_with_its_reset(
        self, sim: SimulatorControl, client: httpx.Client
    ) -> None:
        sim.register(OAUTH, kind="oauth", label="plan-a")
        sim.set_usage(OAUTH, "five_hour", percent=100)

        reading = anthropic.probe(token=Secret(OAUTH), client=client, now=T0)

        assert reading.status is ReadingStatus.RATE_LIMITED
        assert reading.reset_at == T0 + timedelta(hours=5)
        assert reading.windows["five_hour"].status == "rejected"
        assert reading.windows["five_hour"].utilization == 100.0
        assert reading.windows["seven_day"].status == "allowed"

    @pytest.mark.parametrize("endpoint", ["usage", "probe"])
    def test_a_revoked_token_is_invalid_token(
        self, sim: SimulatorControl, client: httpx.Client, endpoint: str
    ) -> None:
        sim.register(OAUTH, kind="oauth", label="plan-a")
        sim.revoke(OAUTH)
        if endpoint == "usage":
            reading = anthropic.read(token=Secret(OAUTH), client=client, now=T0).reading
        else:
            reading = anthropic.probe(token=Secret(OAUTH), client=client, now=T0)

        assert reading.status is ReadingStatus.INVALID_TOKEN
        assert reading.detail == "HTTP 401"

    def test_any_other_refusal_of_the_probe_is_an_error(
        self, sim: SimulatorControl, client: httpx.Client, settings: Settings
    ) -> None:
        settings.TRINITY_HEADROOM_PROBE_MODEL = "claude-retired-1"
        sim.register(OAUTH, kind="oauth", label="plan-a")

        reading = anthropic.probe(token=Secret(OAUTH), client=client, now=T0)

        assert (reading.status, reading.detail) == (ReadingStatus.ERROR, "HTTP 404")

    def test_a_200_without_unified_headers_is_an_error_logged_as_drift(
        self, sim: SimulatorControl, client: httpx.Client, caplog: pytest.LogCaptureFixture
    ) -> None:
        # A pay-per-token key is served without plan headers: the shape a plan
        # answer would have if the provider dropped them.
        sim.register(API_KEY, kind="api_key", label="key-a")

        reading = anthropic.probe(token=Secret(API_KEY), client=client, now=T0, label="plan-x")

        assert reading.status is ReadingStatus.ERROR
        assert reading.detail.startswith("provider drift")
        assert "provider drift" in caplog.text and "plan-x" in caplog.text
        assert API_KEY not in caplog.text

    def test_tokens_appear_in_no_log_line_or_reading(
        self, sim: SimulatorControl, client: httpx.Client, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level("DEBUG")
        sim.register(OAUTH, kind="oauth", label="plan-a")
        sim.set_usage_scope(OAUTH, allowed=False)
        sim.set_usage(OAUTH, "five_hour", percent=100)

        reading = anthropic.read(token=Secret(OAUTH), client=client, now=T0).reading

        assert reading.status is ReadingStatus.RATE_LIMITED
        assert OAUTH not in caplog.text
        assert OAUTH not in repr(reading)


class TestTransport:
    def test_an_unreachable_provider_is_an_error_naming_no_request(
        self, settings: Settings, client: httpx.Client
    ) -> None:
        settings.TRINITY_ANTHROPIC_BASE_URL = "http://127.0.0.1:9"

        reading = anthropic.read(token=Secret(OAUTH), client=client, now=T0).reading

        assert (reading.status, reading.detail) == (ReadingStatus.ERROR, "unreachable")

    def test_a_slow_provider_times_out_per_probe(self, sim: SimulatorControl) -> None:
        sim.register(OAUTH, kind="oauth", label="plan-a")
        sim.set_latency(600, scope="usage")

        with collectors.http_client(timeout=0.2, max_connections=1) as slow:
            reading = anthropic.read(token=Secret(OAUTH), client=slow, now=T0).reading

        assert (reading.status, reading.detail) == (ReadingStatus.ERROR, "timeout")


class TestCodex:
    def test_windows_are_read_and_named_by_duration(
        self, sim: SimulatorControl, client: httpx.Client
    ) -> None:
        sim.register(CODEX, kind="codex", label="codex-a", plan_type="plus")
        sim.set_usage(CODEX, "five_hour", percent=30)
        sim.set_usage(CODEX, "seven_day", percent=55)

        reading = collectors.read(
            provider="openai-codex", token=Secret(CODEX), client=client, now=T0
        ).reading

        assert reading.status is ReadingStatus.OK
        assert reading.windows["five_hour"].utilization == 30.0
        assert reading.windows["five_hour"].resets_at == T0 + timedelta(hours=5)
        assert reading.windows["seven_day"].utilization == 55.0
        assert reading.windows["seven_day"].resets_at == T0 + timedelta(days=7)
        assert _paths(sim) == [("GET", "/backend-api/wham/usage", 200)]

    def test_a_reached_limit_is_rate_limited_until_the_full_window_resets(
        self, sim: SimulatorControl, client: httpx.Client
    ) -> None:
        sim.register(CODEX, kind="codex", label="codex-a")
        sim.set_usage(CODEX, "five_hour", percent=100)

        reading = openai_codex.read(token=Secret(CODEX), client=client, now=T0).reading

        assert reading.status is ReadingStatus.RATE_LIMITED
        assert reading.windows["five_hour"].status == "rejected"
        assert reading.reset_at == T0 + timedelta(hours=5)

    def test_a_revoked_token_is_invalid_token(
        self, sim: SimulatorControl, client: httpx.Client
    ) -> None:
        sim.register(CODEX, kind="codex", label="codex-a")
        sim.revoke(CODEX)

        reading = openai_codex.read(token=Secret(CODEX), client=client, now=T0).reading

        assert reading.status is ReadingStatus.INVALID_TOKEN

    def test_primary_and_secondary_are_not_what_names_a_window(self) -> None:
        body = {
            "rate_limit": {
                "limit_reached": False,
                # The weekly window reported as primary: the name still follows the duration.
                "primary_window": {
                    "used_percent": 71,
                    "limit_window_seconds": 604800,
                    "reset_at": int((T0 + timedelta(days=2)).timestamp()),
                },
                "secondary_window": {
                    "used_percent": 12,
                    "limit_window_seconds": 18000,
                    "reset_at": int((T0 + timedelta(hours=1)).timestamp()),
                },
            }
        }

        reading = openai_codex.parse_usage_body(body, now=T0)

        assert reading is not None
        assert reading.windows["seven_day"].utilization == 71.0
        assert reading.windows["five_hour"].utilization == 12.0
        assert reading.windows["five_hour"].resets_at == T0 + timedelta(hours=1)

    def test_an_unknown_shape_is_drift(self) -> None:
        assert openai_codex.parse_usage_body({"plan_type": "plus"}, now=T0) is None
        assert openai_codex.parse_usage_body([], now=T0) is None


class TestUsageRetryAfter:
    """The usage endpoints rate-limit per account; a 429 says when to ask again."""

    def test_a_throttled_usage_endpoint_is_an_error_with_its_retry_instant_and_no_probe(
        self, sim: SimulatorControl, client: httpx.Client
    ) -> None:
        sim.register(OAUTH, kind="oauth", label="plan-a")
        sim.throttle_usage(OAUTH, seconds=120)

        collected = anthropic.read(token=Secret(OAUTH), client=client, now=T0)

        assert collected.reading.status is ReadingStatus.ERROR
        assert collected.reading.detail == "usage rate-limited"
        assert collected.retry_at == T0 + timedelta(seconds=120)
        # the 1-token probe would spend quota to learn what waiting costs nothing
        assert _paths(sim) == [("GET", "/api/oauth/usage", 429)]

    def test_codex_carries_the_retry_instant_too(
        self, sim: SimulatorControl, client: httpx.Client
    ) -> None:
        sim.register(CODEX, kind="codex", label="codex-a")
        sim.throttle_usage(CODEX, seconds=30)

        collected = openai_codex.read(token=Secret(CODEX), client=client, now=T0)

        assert (collected.reading.status, collected.retry_at) == (
            ReadingStatus.ERROR,
            T0 + timedelta(seconds=30),
        )

    @pytest.mark.parametrize(
        ("header", "expected"),
        [
            ("90", timedelta(seconds=90)),
            ("0", None),  # already past: nothing to wait for
            ("Tue, 01 Jan 2030 12:02:00 GMT", timedelta(minutes=2)),
            ("Tue, 01 Jan 2030 11:59:00 GMT", None),
            ("86400", timedelta(hours=1)),  # capped: a hint, not a day of silence
            ("soon", None),
            ("", None),
        ],
    )
    def test_retry_after_reads_seconds_and_dates_capped_at_an_hour(
        self, header: str, expected: timedelta | None
    ) -> None:
        response = httpx.Response(429, headers={"retry-after": header} if header else {})
        at = common.retry_after(response, now=T0)
        assert at == (T0 + expected if expected is not None else None)


@pytest.mark.parametrize(
    ("raw", "scale", "figure"),
    [
        ("0.42", 100, 42.0),
        ("1.0", 100, 100.0),
        ("1.0100", 100, 100.0),  # an overdrawn window in the headers
        (101, 1, 100.0),  # the same from the usage endpoint
        (99.96, 1, 100.0),  # rounds to one decimal first
        (99.94, 1, 99.9),
        ("-0.01", 100, 0.0),
        ("nan", 1, None),
        ("inf", 1, None),
        ("n/a", 1, None),
        (True, 1, None),
    ],
)
def test_a_utilization_is_clamped_to_100_where_the_reading_is_made(
    raw: object, scale: float, figure: float | None
) -> None:
    assert common.percent(raw, scale=scale) == figure


@pytest.mark.parametrize(
    ("raw", "scale", "status"),
    [
        (99.96, 1, "allowed"),  # reads 100.0 by rounding; the provider still serves it
        (100, 1, "rejected"),
        (101, 1, "rejected"),
        ("0.9999", 100, "allowed"),
        ("1.0", 100, "rejected"),
        ("n/a", 1, "allowed"),
    ],
)
def test_a_window_is_rejected_only_at_100_before_rounding(
    raw: object, scale: float, status: str
) -> None:
    assert common.window_status(raw, scale=scale) == status


def test_a_plan_that_reads_100_only_by_rounding_stays_serving() -> None:
    resets = (T0 + timedelta(hours=2)).isoformat()
    body = {
        "five_hour": {"utilization": 99.97, "resets_at": resets},
        "seven_day": {"utilization": 40.0, "resets_at": resets},
    }
    reading = anthropic.parse_usage_body(body, now=T0)

    assert reading is not None
    assert reading.windows["five_hour"].utilization == 100.0
    assert reading.windows["five_hour"].status == "allowed"
    assert reading.status is ReadingStatus.OK
    body["five_hour"]["utilization"] = 100.0
    refused = anthropic.parse_usage_body(body, now=T0)
    assert refused is not None and refused.status is ReadingStatus.RATE_LIMITED


def test_a_codex_window_that_reads_100_only_by_rounding_stays_serving() -> None:
    window = {"used_percent": 99.96, "limit_window_seconds": 18000, "reset_at": 2_000_000_000}
    reading = openai_codex.parse_usage_body({"rate_limit": {"primary_window": window}}, now=T0)

    assert reading is not None and reading.windows["five_hour"].status == "allowed"


def test_a_served_codex_answer_reads_its_windows_by_length_not_position() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    # The weekly window came as primary here: the length names it.
    headers = {
        "x-codex-primary-used-percent": "99.97",
        "x-codex-primary-window-minutes": "10080",
        "x-codex-primary-reset-at": str(int(now.timestamp()) + 86400),
        "x-codex-secondary-used-percent": "40",
        "x-codex-secondary-window-minutes": "300",
        "x-codex-secondary-reset-at": str(int(now.timestamp()) + 3600),
    }
    reading = openai_codex.parse_codex_headers(headers, now=now)
    assert reading is not None and reading.status is ReadingStatus.OK
    week, five = reading.windows["seven_day"], reading.windows["five_hour"]
    assert (five.utilization, five.resets_at) == (40.0, now + timedelta(hours=1))
    assert (week.utilization, week.resets_at) == (100.0, now + timedelta(days=1))
    # 100 % only by rounding: still a candidate for one more request.
    assert week.status == "allowed"
    assert openai_codex.parse_codex_headers({"x-codex-primary-used-percent": "5"}, now=now) is None
