"""The key is metered where it is spent: agent code cannot spend past the admin's cap.

Real processes end to end: a turn through the platform's REST API on the platform
key (an agent with no plan), the local runtime starting a real agent server, the real
Claude Code CLI, and the simulator's scripted tool-using model
(simulator/redteam.py), whose Bash call spends the turn's capability directly: curl
to ``$ANTHROPIC_BASE_URL/v1/messages`` with ``$ANTHROPIC_API_KEY`` (the capability
the CLI holds), a request of about 100k input tokens at a time, 25 times, writing what
each answered to a file in the agent's working directory (the CLI's own follow-up,
which would carry that output to the model, is refused at the cap too).

Before, the forwarder metered nothing: every request was served, the provider charged
dollars, the platform recorded the CLI's own cents and the cap never closed. Now the
forwarder refuses at the cap with a 429 the Bash output shows, the day's ledger
equals what the simulator charged the key (within 1 %), the budget is closed, and
the next key turn is not offered the key.
"""

from __future__ import annotations

import secrets
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from simulator.control import SimulatorControl
from subscriptions.key_spend import key_budget_closed
from subscriptions.models import FLEET_SCOPE, KeySpend, RateLimitEvent
from tests.agents.factories import AgentFactory
from trinity import clock
from trinity import services as trinity_services
from trinity.selectors import system_settings_get

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

KEY_LABEL = "platform-key"
DAILY_CAP = Decimal("1.00")
EXTRA_REQUESTS = 25
# ~100k input tokens a request (the simulator counts four characters a token): about
# $0.30 on Sonnet, so the cap is passed on the fourth.
PROMPT_CHARS = 400_000
PROBE = "meter-probe.txt"
TURN_TIMEOUT = 240


def spend_script() -> str:
    """The Bash command: extra large requests on the turn's capability, each answer's
    status and body appended to ``PROBE`` in the working directory."""
    body = (
        'printf \'{"model":"claude-sonnet-4-5","max_tokens":16,"messages":'
        '[{"role":"user","content":"\'; '
        f"head -c {PROMPT_CHARS} /dev/zero | tr '\\0' 'a'; printf '\"}}]}}'"
    )
    request = (
        'curl -sS "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" '
        "-H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' "
        "--data-binary @\"$f\" -w ' HTTP %{http_code}\\n'"
    )
    return (
        f'f=$(mktemp); {{ {body}; }} > "$f"; '
        f"for i in $(seq 1 {EXTRA_REQUESTS}); do {request}; done > {PROBE} 2>&1; "
        f'rm -f "$f"; tail -c 2000 {PROBE}'
    )


def turn(client: APIClient, message: str) -> dict[str, object]:
    response = client.post(
        "/api/agents/bot/task",
        {"message": message, "timeout_seconds": TURN_TIMEOUT},
        format="json",
    )
    body: dict[str, object] = response.json()
    body["http_status"] = response.status_code
    return body


def key_messages(control: SimulatorControl) -> list[int]:
    return [
        r["status"]
        for r in control.requests()
        if r["credential"] == KEY_LABEL and r["path"] == "/v1/messages"
    ]


def test_agent_code_spending_the_key_is_refused_at_the_admins_cap(
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
    admin_client_api: APIClient,
) -> None:
    key = "sk-ant-api03-" + secrets.token_urlsafe(40)
    control.register(key, kind="api_key", label=KEY_LABEL, credit_usd=50)
    trinity_services.platform_api_key_set(key=key)
    capped = admin_client_api.put(
        "/api/subscriptions/settings/routing",
        {"key_budget_daily_usd": str(DAILY_CAP)},
        format="json",
    )
    assert capped.status_code == 200, capped.json()
    AgentFactory.create(name="bot", owner=owner, allowed_tools=["Bash"], use_platform_api_key=True)
    trigger = "meter-" + secrets.token_hex(8)
    control.arm_red_team(trigger=trigger, reads=[], commands=[spend_script()])

    body = turn(owner_client, f"{trigger}: spend the key")

    # The Bash output shows the forwarder's refusal, worded for a person.
    cwd = control.red_team()["cwd"]
    assert cwd, "the CLI named no working directory: the scripted model never ran"
    probe = Path(str(cwd), PROBE).read_text()
    statuses = [line.rsplit(" ", 1)[-1] for line in probe.splitlines() if " HTTP " in line]
    assert len(statuses) == EXTRA_REQUESTS, probe[-2000:]
    assert "429" in statuses, f"the forwarder never refused: {statuses}"
    assert "budget of $1.00 is reached" in probe, probe[-2000:]
    served = statuses.index("429")
    assert set(statuses[served:]) == {"429"}, statuses  # refused from the cap on

    # The CLI's own follow-up was refused too: the turn ended on the key's budget
    # (billing, key_budget), not on a provider refusal, and walked nowhere.
    assert (body["http_status"], body["error_code"], body["walk_stop"]) == (
        429,
        "billing",
        "key_budget",
    ), body
    assert "budget of $1.00 is reached" in str(body["error_detail"]), body
    assert Decimal(str(body["cost_usd"])) >= DAILY_CAP  # the failed turn's own spend
    assert not RateLimitEvent.objects.exists(), "the budget refusal was recorded as a quota one"

    # The platform's ledger for the day is what the provider charged the key.
    charged = Decimal(str(control.credential(KEY_LABEL)["charged_usd"]))
    day = KeySpend.objects.get(scope=FLEET_SCOPE, period="day")
    assert day.reserved_usd == 0
    assert abs(day.spent_usd - charged) <= charged / 100, (day.spent_usd, charged)
    assert charged >= DAILY_CAP
    assert charged < DAILY_CAP + Decimal("0.5"), charged  # past it by one request at most

    # The cap is closed now, and the next key turn is not offered the key.
    agent = Agent.objects.get(name="bot")
    assert key_budget_closed(agent=agent, system=system_settings_get(), now=clock.now())
    control.clear_requests()
    control.disarm_red_team()
    following = turn(owner_client, "say hi")
    assert (following["http_status"], following["error_code"], following["walk_stop"]) == (
        429,
        "billing",
        "key_budget",
    ), following
    assert key_messages(control) == []
