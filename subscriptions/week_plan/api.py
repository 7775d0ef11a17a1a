"""``GET /api/week-plan``: the last week plan, as the signed-in user may read it."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.api import PlannedOutput
from subscriptions.week_plan.selectors import week_plan_visible
from trinity import clock


class PlacementOutput(PlannedOutput):
    """An agent's entry as the Agents API shows it, with whose agent it is and
    whether a turn acts on it now."""

    agent = serializers.CharField()
    owner = serializers.CharField()
    current = serializers.BooleanField(
        help_text="whether a turn now acts on it (the plan is fresh and `until` is ahead)"
    )


class ReserveOutput(serializers.Serializer[Any]):
    subscription_id = serializers.IntegerField()
    name = serializers.CharField()
    percent = serializers.FloatField(
        help_text="percent of its weekly window held back for demand after the next 5 hours"
    )


class SpillOutput(serializers.Serializer[Any]):
    family = serializers.CharField(allow_null=True)
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    tokens = serializers.FloatField()


class WeekPlanOutput(serializers.Serializer[Any]):
    made_at = serializers.DateTimeField(allow_null=True, help_text="null: no plan stored")
    stale = serializers.BooleanField(
        help_text="older than 30 minutes (or none): turns follow today's rules instead"
    )
    status = serializers.CharField(help_text="the solver's status")
    solve_seconds = serializers.FloatField(allow_null=True)
    key_usd = serializers.FloatField(
        allow_null=True, help_text="the platform key's planned spend over the 7 days"
    )
    demand_mtok = serializers.FloatField(
        allow_null=True, help_text="the forecast demand over the 7 days, million tokens"
    )
    placements = PlacementOutput(many=True)
    reserves = ReserveOutput(many=True)
    spill = SpillOutput(many=True)


class WeekPlanApi(APIView):
    @extend_schema(responses=WeekPlanOutput)
    def get(self, request: Request) -> Response:
        plan = week_plan_visible(user=request.user, now=clock.now())
        return Response(WeekPlanOutput(plan).data)
