"""An overdrawn window reads 100 %, never more, end to end: a real agent server running
the real Claude Code CLI spends a plan past its 5-hour capacity (the simulator reports
``1.0x`` in the unified headers and ``101`` from the usage endpoint), and every view
of the reading (usage API, history, pressure list, alert title, ``trinity_status``)
says 100 %."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions.models import HeadroomSample
from tests.execution.support import agent_on, register_plan, task
from trinity import services as trinity_services
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _five_hour(client: APIClient, pk: int) -> object:
    body = client.get(f"/api/subscriptions/{pk}/usage").json()
    return body["headroom"]["windows"]["five_hour"]["utilization"]


def test_a_window_overdrawn_by_a_served_turn_reads_100_percent_everywhere(
    control: SimulatorControl, owner: User, owner_client: APIClient, admin_client_api: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    agent_on(owner, a)
    capacity = control.credential("plan-a")["windows"]["five_hour"]["capacity"]
    control.set_usage(a_token, "five_hour", tokens=capacity - 10)

    served = task(owner_client)
    assert served["http_status"] == 200, served
    window = control.credential("plan-a")["windows"]["five_hour"]
    assert window["utilization"] > 1.0  # the turn overdrew it: the headers said 1.0x
    assert _five_hour(owner_client, a.pk) == 100.0

    # The usage endpoint says 101 (percent) on a refresh; the alert says 100.0 %.
    trinity_services.system_setting_set(name="headroom_alert_threshold", value=80)
    control.set_usage(a_token, "five_hour", percent=101)
    refreshed = owner_client.post(f"/api/subscriptions/{a.pk}/usage/refresh")
    assert refreshed.status_code == 200, refreshed.content
    assert _five_hour(owner_client, a.pk) == 100.0
    alert = Notification.objects.get(kind="headroom_alert", data__window="five_hour")
    assert alert.title == "plan-a: 5-hour window at 100.0%", alert.title
    assert alert.data["utilization"] == 100.0
    assert max(s.five_hour or 0 for s in HeadroomSample.objects.filter(subscription=a)) == 100.0
    history = owner_client.get(f"/api/subscriptions/{a.pk}/headroom/history").json()
    assert max(sample["five_hour"] or 0 for sample in history["samples"]) == 100.0, history
    pressure = admin_client_api.get("/api/agents/subscription-pressure").json()
    (row,) = [r for r in pressure["subscriptions"] if r["id"] == a.pk]
    assert row["headroom"]["windows"]["five_hour"]["utilization"] == 100.0, row
    out = StringIO()
    call_command("trinity_status", stdout=out)
    assert "100%" in out.getvalue() and "101%" not in out.getvalue(), out.getvalue()
