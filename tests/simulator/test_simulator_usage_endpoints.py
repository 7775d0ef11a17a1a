"""The provider usage endpoints: Anthropic OAuth usage and the Codex (wham) shape."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx

from simulator.control import SimulatorControl

OAUTH = "sk-ant-oat01-usage-0000-aaaa"
CODEX = "codex-plan-token-0000-cccc"


def oauth_usage(api: httpx.Client, token: str) -> httpx.Response:
    return api.get(
        "/api/oauth/usage",
        headers={"authorization": f"Bearer {token}", "anthropic-beta": "oauth-2025-04-20"},
    )


def test_oauth_usage_reports_each_window_in_percent_with_its_reset(
    control: SimulatorControl, api: httpx.Client, frozen: datetime
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_usage(OAUTH, "five_hour", percent=42)
    control.set_usage(OAUTH, "seven_day_sonnet", percent=7.5)

    response = oauth_usage(api, OAUTH)

    assert response.status_code == 200
    body = response.json()
    assert body["five_hour"] == {
        "utilization": 42.0,
        "resets_at": (frozen + timedelta(hours=5)).isoformat(),
    }
    assert body["seven_day_sonnet"] == {
        "utilization": 7.5,
        "resets_at": (frozen + timedelta(days=7)).isoformat(),
    }
    assert body["seven_day"] == {"utilization": 0.0, "resets_at": None}
    assert body["seven_day_opus"] == {"utilization": 0.0, "resets_at": None}


def test_oauth_usage_answers_403_while_the_token_lacks_the_usage_scope(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")

    control.set_usage_scope(OAUTH, allowed=False)
    refused = oauth_usage(api, OAUTH)
    control.set_usage_scope(OAUTH, allowed=True)
    served = oauth_usage(api, OAUTH)

    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "permission_error"
    assert served.status_code == 200


def test_oauth_usage_answers_401_for_a_revoked_token(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.revoke(OAUTH)

    response = oauth_usage(api, OAUTH)

    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_oauth_usage_follows_served_messages(control: SimulatorControl, api: httpx.Client) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a", capacity={"five_hour": 100})

    api.post(
        "/v1/messages",
        headers={"authorization": f"Bearer {OAUTH}"},
        json={
            "model": "claude-opus-4-1",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "x" * 80}],
        },
    )

    body = oauth_usage(api, OAUTH).json()
    spent = control.credential("plan-a")["windows"]["five_hour"]["used"]
    assert spent > 0
    assert body["five_hour"]["utilization"] == float(spent)
    assert body["seven_day_opus"]["resets_at"] is not None
    assert body["seven_day_sonnet"]["resets_at"] is None


def test_codex_usage_has_the_wham_shape(
    control: SimulatorControl, api: httpx.Client, frozen: datetime
) -> None:
    control.register(CODEX, kind="codex", label="codex-a", plan_type="pro")
    control.set_usage(CODEX, "five_hour", percent=30)
    control.set_usage(CODEX, "seven_day", percent=100)
    control.advance_clock(100)

    response = api.get("/backend-api/wham/usage", headers={"authorization": f"Bearer {CODEX}"})

    t0 = int(frozen.timestamp())
    assert response.status_code == 200
    body = response.json()
    assert body["plan_type"] == "pro"
    limits = body["rate_limit"]
    assert limits["allowed"] is False
    assert limits["limit_reached"] is True
    assert limits["primary_window"] == {
        "used_percent": 30,
        "limit_window_seconds": 18000,
        "reset_after_seconds": 18000 - 100,
        "reset_at": t0 + 18000,
    }
    assert limits["secondary_window"] == {
        "used_percent": 100,
        "limit_window_seconds": 604800,
        "reset_after_seconds": 604800 - 100,
        "reset_at": t0 + 604800,
    }


def test_codex_usage_clears_once_its_windows_reset(
    control: SimulatorControl, api: httpx.Client, frozen: datetime
) -> None:
    control.register(CODEX, kind="codex", label="codex-a")
    control.set_usage(CODEX, "seven_day", percent=100)
    control.advance_clock(604800)

    limits = api.get(
        "/backend-api/wham/usage", headers={"authorization": f"Bearer {CODEX}"}
    ).json()["rate_limit"]

    assert limits["allowed"] is True
    assert limits["limit_reached"] is False
    assert limits["secondary_window"]["used_percent"] == 0


def test_codex_usage_refuses_a_revoked_token_and_plan_tokens(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.register(CODEX, kind="codex", label="codex-a")
    control.revoke(CODEX)

    revoked = api.get("/backend-api/wham/usage", headers={"authorization": f"Bearer {CODEX}"})
    anthropic = api.get("/backend-api/wham/usage", headers={"authorization": f"Bearer {OAUTH}"})
    missing = api.get("/backend-api/wham/usage")

    assert revoked.status_code == 401
    assert anthropic.status_code == 401
    assert missing.status_code == 401


def test_a_weekly_block_with_a_far_reset_sits_beside_an_allowed_5h_window_about_to_roll(
    control: SimulatorControl, api: httpx.Client, frozen: datetime
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_usage(OAUTH, "seven_day", percent=100, resets_in=3 * 86400)
    control.set_usage(OAUTH, "five_hour", percent=28, resets_in=600)

    body = oauth_usage(api, OAUTH).json()

    assert body["seven_day"] == {
        "utilization": 100.0,
        "resets_at": (frozen + timedelta(days=3)).isoformat(),
    }
    assert body["five_hour"] == {
        "utilization": 28.0,
        "resets_at": (frozen + timedelta(minutes=10)).isoformat(),
    }
    # Past the 5h rollover the weekly block stands; the 5h window is empty again.
    control.advance_clock(601)
    rolled = oauth_usage(api, OAUTH).json()
    assert rolled["five_hour"] == {"utilization": 0.0, "resets_at": None}
    assert rolled["seven_day"]["utilization"] == 100.0


def test_an_overdrawn_window_reads_over_100_percent(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_usage(OAUTH, "five_hour", percent=101)

    assert oauth_usage(api, OAUTH).json()["five_hour"]["utilization"] == 101.0


def test_reset_jitter_shifts_each_answers_resets_in_turn(
    control: SimulatorControl, api: httpx.Client, frozen: datetime
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_usage(OAUTH, "five_hour", percent=100)
    control.set_reset_jitter(OAUTH, [0, -1, -3])
    exact = frozen + timedelta(hours=5)

    seen = [oauth_usage(api, OAUTH).json()["five_hour"]["resets_at"] for _ in range(4)]

    assert seen == [
        exact.isoformat(),
        (exact - timedelta(seconds=1)).isoformat(),
        (exact - timedelta(seconds=3)).isoformat(),
        exact.isoformat(),
    ]
    control.set_reset_jitter(OAUTH, [])
    assert oauth_usage(api, OAUTH).json()["five_hour"]["resets_at"] == exact.isoformat()
