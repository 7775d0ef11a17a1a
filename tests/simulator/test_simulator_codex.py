"""The OpenAI side over HTTP: the ChatGPT backend's Responses endpoint, the platform's
/v1/responses, the sign-in refresh and their control calls (simulator/codex.py)."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from simulator.control import SimulatorControl
from trinity_contract.prices import OPENAI, TokenUsage, cost_usd

PLAN = "codex-access-token-0000-cccc"
REFRESH = "rt-codex-refresh-0000-rrrr"
ACCOUNT = "acct-1"
KEY = "sk-proj-codex-sim-key-0000-kkkk"
CHATGPT = "/backend-api/codex/responses"
PLATFORM = "/v1/responses"


def turn_body(
    text: str = "say hi", *, stream: bool = True, model: str = "gpt-5.5-codex", history: int = 0
) -> dict[str, Any]:
    """A Responses request as the CLI builds one: developer text, environment context,
    earlier turns, then the prompt."""

    def message(role: str, text: str, kind: str = "input_text") -> dict[str, Any]:
        return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}

    earlier = [message("user", f"earlier question {i} " * 20) for i in range(history)]
    return {
        "model": model,
        "instructions": "You are Codex.",
        "stream": stream,
        "input": [
            message("developer", "<permissions instructions>sandboxed</permissions instructions>"),
            message("user", "<environment_context><cwd>/w</cwd></environment_context>"),
            *earlier,
            message("user", text),
        ],
    }


def plan_post(
    api: httpx.Client, token: str = PLAN, *, account: str | None = ACCOUNT, **body: Any
) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"}
    if account is not None:
        headers["chatgpt-account-id"] = account
    return api.post(CHATGPT, headers=headers, json=turn_body(**body))


def platform_post(api: httpx.Client, key: str = KEY, **body: Any) -> httpx.Response:
    return api.post(PLATFORM, headers={"authorization": f"Bearer {key}"}, json=turn_body(**body))


def events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """The SSE frames as (event, data) pairs."""
    frames = []
    for block in response.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        frames.append((lines["event"], json.loads(lines["data"])))
    return frames


def refresh(api: httpx.Client, token: str) -> httpx.Response:
    body = {"client_id": "app_sim", "grant_type": "refresh_token", "refresh_token": token}
    return api.post("/oauth/token", json=body)


def claims(jwt: str) -> dict[str, Any]:
    payload = jwt.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


@pytest.fixture
def plan(control: SimulatorControl, frozen: datetime) -> str:
    """A ChatGPT sign-in registered at the frozen instant (its token lives an hour)."""
    control.register(
        PLAN,
        kind="codex",
        label="codex-a",
        account_id=ACCOUNT,
        refresh_token=REFRESH,
        expires_in=3600,
        user_id="user-1",
    )
    return PLAN


# the ChatGPT plan


def test_a_plan_turn_streams_the_reply_and_spends_both_windows(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    response = plan_post(api, text="  say   hi  ")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = events(response)
    assert [name for name, _ in frames] == [
        "response.created",
        "response.output_item.done",
        "response.completed",
    ]
    item = frames[1][1]["item"]
    assert (item["type"], item["role"]) == ("message", "assistant")
    assert item["content"][0] == {
        "type": "output_text",
        "text": "Simulated reply: say hi",
        "annotations": [],
    }
    usage = frames[2][1]["response"]["usage"]
    assert usage["output_tokens"] == len("Simulated reply: say hi") // 4
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    windows = control.credential("codex-a")["windows"]
    assert windows["five_hour"]["used"] == windows["seven_day"]["used"] == usage["total_tokens"]
    log = [
        (r["path"], r["auth_kind"], r["credential"], r["model"], r["status"], r["stream"])
        for r in control.requests()
    ]
    assert log == [(CHATGPT, "codex", "codex-a", "gpt-5.5-codex", 200, True)]


def test_a_longer_history_costs_more_input_tokens(api: httpx.Client, plan: str) -> None:
    def input_tokens(history: int) -> int:
        frames = events(plan_post(api, history=history))
        return int(frames[-1][1]["response"]["usage"]["input_tokens"])

    assert input_tokens(0) < input_tokens(3) < input_tokens(6)


def test_every_plan_answer_carries_the_headroom_wham_usage_reports(
    control: SimulatorControl, api: httpx.Client, plan: str, frozen: datetime
) -> None:
    control.register(PLAN, kind="codex", capacity={"five_hour": 20_000, "seven_day": 200_000})
    control.set_usage(PLAN, "five_hour", percent=40)
    control.set_usage(PLAN, "seven_day", percent=10, resets_in=86400)
    control.advance_clock(60)
    t0 = int(frozen.timestamp())

    served = plan_post(api)
    refused = plan_post(api, model="gpt-imaginary")
    wham = api.get("/backend-api/wham/usage", headers={"authorization": f"Bearer {PLAN}"})

    limits = wham.json()["rate_limit"]
    for response in (served, refused):
        headers = response.headers
        assert headers["x-codex-primary-window-minutes"] == "300"
        assert headers["x-codex-secondary-window-minutes"] == "10080"
        assert headers["x-codex-primary-reset-at"] == str(t0 + 5 * 3600)
        assert headers["x-codex-secondary-reset-at"] == str(t0 + 86400)
        assert headers["x-codex-primary-reset-after-seconds"] == str(5 * 3600 - 60)
        assert int(headers["x-codex-primary-reset-at"]) == limits["primary_window"]["reset_at"]
        assert int(headers["x-codex-secondary-reset-at"]) == limits["secondary_window"]["reset_at"]
    # The served answer reports what it spent; the refusal spent nothing after it.
    assert float(served.headers["x-codex-primary-used-percent"]) > 40.0
    assert (
        refused.headers["x-codex-primary-used-percent"]
        == served.headers["x-codex-primary-used-percent"]
    )
    assert (
        round(float(served.headers["x-codex-primary-used-percent"]))
        == limits["primary_window"]["used_percent"]
    )


@pytest.mark.parametrize(
    ("window", "other", "resets_in"),
    [("five_hour", "seven_day", 5 * 3600), ("seven_day", "five_hour", 7 * 86400)],
)
def test_an_exhausted_window_answers_usage_limit_reached_with_its_reset(
    control: SimulatorControl,
    api: httpx.Client,
    plan: str,
    frozen: datetime,
    window: str,
    other: str,
    resets_in: int,
) -> None:
    control.set_usage(PLAN, window, percent=100)  # type: ignore[arg-type]
    control.set_usage(PLAN, other, percent=20)  # type: ignore[arg-type]
    before = control.credential("codex-a")["windows"]

    response = plan_post(api)

    assert response.status_code == 429
    reset = int(frozen.timestamp()) + resets_in
    assert response.json() == {
        "error": {
            "type": "usage_limit_reached",
            "message": "The usage limit has been reached",
            "plan_type": "pro",
            "resets_at": reset,
            "resets_in_seconds": resets_in,
        }
    }
    assert "x-codex-primary-used-percent" in response.headers
    assert control.credential("codex-a")["windows"] == before
    wham = api.get("/backend-api/wham/usage", headers={"authorization": f"Bearer {PLAN}"})
    limits = wham.json()["rate_limit"]
    assert limits["limit_reached"] is True
    binding = "primary_window" if window == "five_hour" else "secondary_window"
    assert limits[binding]["reset_at"] == reset


def test_a_week_blocked_past_the_5h_reset_binds_the_refusal(
    control: SimulatorControl, api: httpx.Client, plan: str, frozen: datetime
) -> None:
    control.register(PLAN, kind="codex", expires_in=30 * 86400)
    control.set_usage(PLAN, "five_hour", percent=100)
    control.set_usage(PLAN, "seven_day", percent=100, resets_in=2 * 86400)

    error = plan_post(api).json()["error"]

    assert error["resets_at"] == int(frozen.timestamp()) + 2 * 86400
    control.advance_clock(2 * 86400)
    assert plan_post(api).status_code == 200


def test_the_plan_endpoint_refuses_unknown_tokens_and_other_accounts(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    control.register(KEY, kind="openai_key", label="platform")

    unknown = plan_post(api, "codex-never-registered-0000")
    platform_key = plan_post(api, KEY)
    no_header = plan_post(api, account=None)
    other = plan_post(api, account="acct-2")

    assert unknown.status_code == platform_key.status_code == 401
    assert unknown.json()["error"]["code"] == "invalid_token"
    assert no_header.status_code == other.status_code == 403
    assert other.json()["error"]["code"] == "account_mismatch"
    assert control.credential("codex-a")["windows"]["five_hour"]["used"] == 0
    assert [r["status"] for r in control.requests()] == [401, 401, 403, 403]


def test_an_outage_comes_before_revocation_and_spends_nothing(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    control.set_upstream_error(503)
    control.revoke(PLAN)

    response = plan_post(api)

    assert response.status_code == 503
    assert response.json()["error"]["type"] == "server_error"
    control.set_upstream_error(0)
    assert plan_post(api).json()["error"]["code"] == "token_invalidated"


def test_revoked_comes_before_expired_and_expired_before_the_model(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    control.expire_access(PLAN)
    expired = plan_post(api, model="gpt-imaginary")
    control.revoke(PLAN)
    revoked = plan_post(api, model="gpt-imaginary")

    assert (expired.status_code, expired.json()["error"]["code"]) == (401, "token_expired")
    assert (revoked.status_code, revoked.json()["error"]["code"]) == (401, "token_invalidated")


def test_an_access_token_expires_exactly_at_its_lifetime(
    control: SimulatorControl, api: httpx.Client, plan: str, frozen: datetime
) -> None:
    control.register(PLAN, kind="codex", expires_in=600)

    control.advance_clock(599)
    before = plan_post(api)
    control.advance_clock(1)
    at = plan_post(api)

    assert before.status_code == 200
    assert (at.status_code, at.json()["error"]["code"]) == (401, "token_expired")
    view = control.credential("codex-a")
    assert view["access_expires_at"] == (frozen + timedelta(seconds=600)).isoformat()


def test_an_unknown_model_answers_400_until_the_control_api_adds_it(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    refused = plan_post(api, model="gpt-6-codex")
    assert "gpt-6-codex" not in control.codex_models()
    control.add_codex_model("gpt-6-codex")
    served = plan_post(api, model="gpt-6-codex")

    assert refused.status_code == 400
    detail = "The 'gpt-6-codex' model is not supported when using Codex with a ChatGPT account."
    assert refused.json() == {"detail": detail}
    assert served.status_code == 200
    assert {"gpt-5.5-codex", "gpt-5-codex", "gpt-5.1-codex-mini"} <= set(control.codex_models())
    control.reset()
    assert "gpt-6-codex" not in control.codex_models()


def test_the_plan_endpoint_streams_only(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    response = plan_post(api, stream=False)

    assert response.status_code == 400
    assert response.json() == {"detail": "Stream must be set to true"}
    assert control.credential("codex-a")["windows"]["five_hour"]["used"] == 0


# the platform key


def test_a_platform_key_is_served_streamed_or_whole_and_charged(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.register(KEY, kind="openai_key", label="platform", credit_usd=1.0)

    streamed = platform_post(api)
    whole = platform_post(api, stream=False)

    assert streamed.status_code == whole.status_code == 200
    assert events(streamed)[1][1]["item"]["content"][0]["text"] == "Simulated reply: say hi"
    assert whole.json()["output"][0]["content"][0]["text"] == "Simulated reply: say hi"
    assert not any(h.startswith("x-codex-") for h in streamed.headers)
    usage = whole.json()["usage"]
    price = cost_usd(
        OPENAI,
        whole.json()["model"],
        TokenUsage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"]),
    )
    assert control.credential("platform")["credit_usd"] == pytest.approx(1.0 - 2 * price)
    assert control.credential("platform")["windows"] == {}
    assert [(r["auth_kind"], r["credential"], r["stream"]) for r in control.requests()] == [
        ("openai_key", "platform", True),
        ("openai_key", "platform", False),
    ]


def test_a_platform_key_without_credit_answers_insufficient_quota(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.register(KEY, kind="openai_key", label="platform", credit_usd=0)

    response = platform_post(api)

    assert response.status_code == 429
    assert response.json()["error"]["type"] == "insufficient_quota"
    assert response.json()["error"]["code"] == "insufficient_quota"
    control.add_credit(KEY, 1)
    assert platform_post(api).status_code == 200


def test_the_platform_refuses_bad_keys_plan_tokens_and_unknown_models(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    control.register(KEY, kind="openai_key", label="platform")

    unknown = platform_post(api, "sk-proj-never-registered-0000")
    plan_token = platform_post(api, PLAN)
    missing = api.post(PLATFORM, json=turn_body())
    model = platform_post(api, model="gpt-imaginary")
    control.revoke(KEY)
    revoked = platform_post(api)

    for refused in (unknown, plan_token, revoked):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"
    assert missing.status_code == 401
    assert model.status_code == 404
    assert model.json()["error"]["code"] == "model_not_found"
    # Neither OpenAI credential passes for an Anthropic one.
    messages = api.post(
        "/v1/messages",
        headers={"authorization": f"Bearer {KEY}"},
        json={"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": []},
    )
    assert messages.status_code == 401


# the sign-in refresh


def test_a_refresh_rotates_both_tokens_and_keeps_the_credential(
    control: SimulatorControl, api: httpx.Client, plan: str, frozen: datetime
) -> None:
    control.register(PLAN, kind="codex", email="a@example.invalid")
    assert plan_post(api).status_code == 200
    spent = control.credential("codex-a")["windows"]

    answer = refresh(api, REFRESH)

    assert answer.status_code == 200
    tokens = answer.json()
    assert set(tokens) >= {"id_token", "access_token", "refresh_token", "expires_in"}
    assert tokens["refresh_token"] != REFRESH and tokens["access_token"] != PLAN
    assert tokens["expires_in"] == 3600
    id_claims = claims(tokens["id_token"])
    assert id_claims["email"] == "a@example.invalid"
    assert id_claims["https://api.openai.com/auth"] == {
        "chatgpt_plan_type": "pro",
        "chatgpt_account_id": ACCOUNT,
        "chatgpt_user_id": "user-1",
    }
    assert claims(tokens["access_token"])["exp"] == int(frozen.timestamp()) + 3600
    view = control.credential("codex-a")
    assert (view["refreshes"], view["windows"]) == (1, spent)
    assert plan_post(api, tokens["access_token"]).status_code == 200
    # The rotated token spends the same windows, as wham/usage shows for it too.
    assert (
        control.credential("codex-a")["windows"]["five_hour"]["used"] > spent["five_hour"]["used"]
    )
    wham = api.get(
        "/backend-api/wham/usage", headers={"authorization": f"Bearer {tokens['access_token']}"}
    )
    assert wham.status_code == 200
    assert [r["credential"] for r in control.requests()] == ["codex-a"] * 4


def test_the_old_access_token_keeps_working_until_its_own_expiry(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    control.advance_clock(1800)
    new_access = refresh(api, REFRESH).json()["access_token"]

    assert plan_post(api, PLAN).status_code == 200
    control.advance_clock(1800)
    assert plan_post(api, PLAN).json()["error"]["code"] == "token_expired"
    assert plan_post(api, new_access).status_code == 200
    control.advance_clock(1800)
    assert plan_post(api, new_access).json()["error"]["code"] == "token_expired"


def test_a_refresh_token_is_single_use_and_its_reuse_revokes_the_sign_in(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    first = refresh(api, REFRESH).json()
    second = refresh(api, first["refresh_token"])
    reused = refresh(api, REFRESH)

    assert second.status_code == 200
    assert reused.status_code == 401
    assert reused.json()["error"]["code"] == "refresh_token_reused"
    view = control.credential("codex-a")
    assert (view["refreshes"], view["revoked"]) == (2, True)
    # Replay detection ends the whole sign-in: the newest tokens die with it.
    latest = second.json()
    assert plan_post(api, latest["access_token"]).json()["error"]["code"] == "token_invalidated"
    again = refresh(api, latest["refresh_token"])
    assert again.json()["error"]["code"] == "refresh_token_invalidated"
    assert [(r["path"], r["credential"], r["status"]) for r in control.requests()][:3] == [
        ("/oauth/token", "codex-a", 200),
        ("/oauth/token", "codex-a", 200),
        ("/oauth/token", "codex-a", 401),
    ]


def test_a_refresh_is_refused_for_a_revoked_sign_in_and_an_unknown_token(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    unknown = refresh(api, "rt-never-issued-0000")
    control.revoke(PLAN)
    revoked = refresh(api, REFRESH)
    wrong_grant = api.post(
        "/oauth/token", json={"grant_type": "password", "refresh_token": REFRESH}
    )

    assert (unknown.status_code, unknown.json()["error"]["code"]) == (401, "refresh_token_expired")
    assert (revoked.status_code, revoked.json()["error"]["code"]) == (
        401,
        "refresh_token_invalidated",
    )
    assert wrong_grant.status_code == 400
    assert control.credential("codex-a")["refreshes"] == 0


def test_a_form_encoded_refresh_works_too(api: httpx.Client, plan: str) -> None:
    answer = api.post(
        "/oauth/token", data={"grant_type": "refresh_token", "refresh_token": REFRESH}
    )

    assert answer.status_code == 200


def test_the_control_api_never_returns_a_token(
    control: SimulatorControl, api: httpx.Client, plan: str
) -> None:
    control.register(KEY, kind="openai_key", label="platform")
    rotated = refresh(api, REFRESH).json()
    plan_post(api, rotated["access_token"])
    secrets = [
        PLAN,
        REFRESH,
        KEY,
        rotated["access_token"],
        rotated["refresh_token"],
        rotated["id_token"],
    ]

    expired = control.expire_access(rotated["access_token"])
    answers = [
        control.register(PLAN, kind="codex", refresh_token="rt-second-0000-ssss"),
        expired,
        control.credentials(),
        control.requests(),
        control.revoke(KEY),
    ]
    bad = api.post("/_control/credentials", json={"token": rotated["access_token"], "kind": "x"})

    text = json.dumps(answers) + bad.text
    for secret in [*secrets, "rt-second-0000-ssss"]:
        assert secret not in text
    # Found by a rotated access token as well as by the registration token.
    assert expired["label"] == "codex-a"
    assert plan_post(api, rotated["access_token"]).json()["error"]["code"] == "token_expired"
