"""Plan quota per credential: accumulation, unified headers, warning, refusal, reset,
revocation and API-key credit, over real HTTP against the subprocess."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import httpx

from simulator.control import SimulatorControl
from trinity_contract.prices import ANTHROPIC, TokenUsage, cost_usd

OAUTH = "sk-ant-oat01-quota-0000-aaaa"
API_KEY = "sk-ant-api03-quota-key-0000-kkkk"
FIVE_HOURS = 5 * 3600
SEVEN_DAYS = 7 * 86400
PostMessage = Callable[..., httpx.Response]
CREDIT_TOO_LOW = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)


def unified(response: httpx.Response, name: str) -> str:
    return response.headers[f"anthropic-ratelimit-unified-{name}"]


def served_tokens(response: httpx.Response) -> int:
    usage = response.json()["usage"]
    return int(usage["input_tokens"] + usage["output_tokens"])


def test_usage_accumulates_across_requests_in_every_applicable_window(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a", capacity={"five_hour": 1000})

    first = post_message(token=OAUTH, text="a" * 100)
    second = post_message(token=OAUTH, text="b" * 200)

    spent = served_tokens(first) + served_tokens(second)
    windows = control.credential("plan-a")["windows"]
    assert windows["five_hour"]["used"] == spent
    assert windows["seven_day"]["used"] == spent
    assert windows["seven_day_sonnet"]["used"] == spent
    assert windows["seven_day_opus"]["used"] == 0
    assert float(unified(first, "5h-utilization")) == served_tokens(first) / 1000
    assert float(unified(second, "5h-utilization")) == spent / 1000


def test_a_served_request_carries_the_unified_headers(
    control: SimulatorControl, post_message: PostMessage, frozen: datetime
) -> None:
    control.register(
        OAUTH, kind="oauth", label="plan-a", capacity={"five_hour": 1000, "seven_day": 10_000}
    )
    control.set_usage(OAUTH, "five_hour", tokens=400)

    response = post_message(token=OAUTH, text="x" * 40)

    t0 = int(frozen.timestamp())
    spent = served_tokens(response)
    assert response.status_code == 200
    assert unified(response, "status") == "allowed"
    assert unified(response, "5h-status") == "allowed"
    assert unified(response, "7d-status") == "allowed"
    assert float(unified(response, "5h-utilization")) == (400 + spent) / 1000
    assert float(unified(response, "7d-utilization")) == spent / 10_000
    assert unified(response, "5h-reset") == str(t0 + FIVE_HOURS)
    assert unified(response, "7d-reset") == str(t0 + SEVEN_DAYS)
    assert unified(response, "representative-claim") == "five_hour"
    assert unified(response, "reset") == str(t0 + FIVE_HOURS)
    assert unified(response, "overage-status") == "rejected"
    assert unified(response, "fallback-percentage") == "0.5"
    assert unified(response, "7d_sonnet-status") == "allowed"
    assert "retry-after" not in response.headers


def test_it_warns_from_eighty_percent(control: SimulatorControl, post_message: PostMessage) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a", capacity={"five_hour": 10_000})
    control.set_usage(OAUTH, "five_hour", percent=79)
    below = post_message(token=OAUTH)
    control.set_usage(OAUTH, "five_hour", percent=85)

    warned = post_message(token=OAUTH)

    assert unified(below, "status") == "allowed"
    assert warned.status_code == 200
    assert unified(warned, "status") == "allowed_warning"
    assert unified(warned, "5h-status") == "allowed_warning"
    assert unified(warned, "7d-status") == "allowed"
    assert unified(warned, "5h-surpassed-threshold") == "0.8"
    assert unified(warned, "representative-claim") == "five_hour"


def test_an_exhausted_window_answers_429_rejected_with_its_reset(
    control: SimulatorControl, post_message: PostMessage, frozen: datetime
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a", capacity={"five_hour": 1000})
    control.set_usage(OAUTH, "five_hour", percent=100)
    control.advance_clock(600)

    response = post_message(token=OAUTH)

    reset = int(frozen.timestamp()) + FIVE_HOURS
    assert response.status_code == 429
    assert response.json() == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed your account's rate limit. "
            "Please try again later.",
        },
    }
    assert response.headers["request-id"].startswith("req_")
    assert unified(response, "status") == "rejected"
    assert unified(response, "5h-status") == "rejected"
    assert unified(response, "representative-claim") == "five_hour"
    assert unified(response, "reset") == str(reset)
    assert unified(response, "5h-reset") == str(reset)
    assert unified(response, "5h-utilization") == "1.0"
    assert response.headers["retry-after"] == str(FIVE_HOURS - 600)
    assert control.credential("plan-a")["windows"]["five_hour"]["used"] == 1000


def test_a_served_request_that_spends_the_last_tokens_is_not_reported_rejected(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a", capacity={"five_hour": 100})
    control.set_usage(OAUTH, "five_hour", tokens=99)

    last = post_message(token=OAUTH)
    after = post_message(token=OAUTH)

    assert last.status_code == 200
    assert unified(last, "status") == "allowed_warning"
    assert after.status_code == 429


def test_a_weekly_exhaustion_names_the_seven_day_claim(
    control: SimulatorControl, post_message: PostMessage, frozen: datetime
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_usage(OAUTH, "seven_day", percent=100)

    response = post_message(token=OAUTH)

    assert response.status_code == 429
    assert unified(response, "representative-claim") == "seven_day"
    assert unified(response, "7d-status") == "rejected"
    assert unified(response, "5h-status") == "allowed"
    assert unified(response, "reset") == str(int(frozen.timestamp()) + SEVEN_DAYS)


def test_the_sonnet_window_refuses_sonnet_and_still_serves_opus(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_usage(OAUTH, "seven_day_sonnet", percent=100)

    sonnet = post_message(token=OAUTH, model="claude-sonnet-4-5")
    opus = post_message(token=OAUTH, model="claude-opus-4-1")

    assert sonnet.status_code == 429
    assert unified(sonnet, "representative-claim") == "seven_day_sonnet"
    assert unified(sonnet, "7d_sonnet-status") == "rejected"
    assert opus.status_code == 200
    assert "anthropic-ratelimit-unified-7d_sonnet-status" not in opus.headers
    assert unified(opus, "7d_opus-status") == "allowed"


def test_the_window_resets_once_the_clock_reaches_its_reset(
    control: SimulatorControl, post_message: PostMessage, frozen: datetime
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a", capacity={"five_hour": 1000})
    control.set_usage(OAUTH, "five_hour", percent=100)

    control.advance_clock(FIVE_HOURS - 1)
    just_before = post_message(token=OAUTH)
    control.advance_clock(1)
    at_reset = post_message(token=OAUTH)

    assert just_before.status_code == 429
    assert at_reset.status_code == 200
    assert unified(at_reset, "status") == "allowed"
    assert float(unified(at_reset, "5h-utilization")) == served_tokens(at_reset) / 1000
    new_reset = int(frozen.timestamp()) + 2 * FIVE_HOURS
    assert unified(at_reset, "5h-reset") == str(new_reset)
    assert control.credential("plan-a")["windows"]["five_hour"]["used"] == served_tokens(at_reset)


def test_a_revoked_token_gets_401(control: SimulatorControl, post_message: PostMessage) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.revoke(OAUTH)

    response = post_message(token=OAUTH)

    assert response.status_code == 401
    assert response.json()["error"] == {
        "type": "authentication_error",
        "message": "OAuth token has been revoked. Please obtain a new token.",
    }
    assert unified(response, "status") == "allowed"


def test_an_api_key_without_credit_gets_400_with_the_billing_message(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(API_KEY, kind="api_key", label="platform-key", credit_usd=0)

    response = post_message(api_key=API_KEY)

    assert response.status_code == 400
    assert response.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": CREDIT_TOO_LOW},
    }
    assert response.headers["request-id"].startswith("req_")


def test_an_api_key_spends_credit_and_carries_no_unified_headers(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(API_KEY, kind="api_key", label="platform-key", credit_usd=0)
    control.add_credit(API_KEY, 1.0)

    response = post_message(api_key=API_KEY)

    assert response.status_code == 200
    assert not [h for h in response.headers if h.startswith("anthropic-ratelimit-unified")]
    # Billed at the model's price (the table the platform meters by), not per token.
    usage = response.json()["usage"]
    price = cost_usd(
        ANTHROPIC,
        response.json()["model"],
        TokenUsage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"]),
    )
    key = control.credential("platform-key")
    assert key["credit_usd"] == round(1.0 - price, 6)
    assert abs(key["charged_usd"] - price) < 1e-8


def test_well_formed_unknown_credentials_are_auto_registered(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    assert post_message(token="sk-ant-oat01-adhoc-0000-zz01").status_code == 200
    assert post_message(api_key="sk-ant-api03-adhoc-0000-zz02").status_code == 200

    plan = control.credential("…zz01")
    key = control.credential("…zz02")
    assert (plan["kind"], plan["auto_registered"]) == ("oauth", True)
    assert (key["kind"], key["auto_registered"]) == ("api_key", True)
    assert key["credit_usd"] > 0
