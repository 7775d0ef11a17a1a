"""Headroom REST API: thin views over the headroom selectors and the refresh service."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.api import AgentRefOutput
from routing.headroom.exhaustion_forecast import Forecast
from subscriptions.headroom.forecast_store import headroom_forecasts_get
from subscriptions.headroom.sampler import headroom_refresh
from subscriptions.headroom.selectors import (
    HISTORY_WINDOWS,
    headroom_history_list,
    headroom_usage_get,
    subscription_pressure_list,
)
from subscriptions.models import HeadroomSample
from subscriptions.selectors import subscription_get_visible
from trinity import clock
from trinity.schema import ErrorOutput


class WindowOutput(serializers.Serializer[Any]):
    utilization = serializers.FloatField(allow_null=True)
    resets_at = serializers.DateTimeField(allow_null=True)
    status = serializers.CharField(allow_null=True)


class HeadroomOutput(serializers.Serializer[Any]):
    state = serializers.CharField(help_text="reading | no_reading | unreachable")
    tier = serializers.CharField(help_text="measured | unknown | refusing")
    gate = serializers.CharField(help_text="why a reading is or is not usable evidence")
    status = serializers.CharField(allow_null=True)
    fetched_at = serializers.DateTimeField(allow_null=True)
    age_seconds = serializers.IntegerField(allow_null=True)
    reading_source = serializers.CharField(source="source", help_text="usage | probe | ...")
    reset_at = serializers.DateTimeField(allow_null=True)
    representative_claim = serializers.CharField(allow_null=True)
    overage_status = serializers.CharField(allow_null=True)
    detail = serializers.CharField()
    windows = serializers.DictField(child=WindowOutput())


class WindowForecastOutput(serializers.Serializer[Any]):
    exhausts_at = serializers.DateTimeField(help_text="when it runs out at this rate")
    burn_per_hour = serializers.FloatField(help_text="percentage points per hour, last hour")
    resets_at = serializers.DateTimeField(allow_null=True)


class ForecastOutput(serializers.Serializer[Any]):
    computed_at = serializers.DateTimeField()
    runs_out_at = serializers.DateTimeField(
        allow_null=True, help_text="the earliest window's instant; null when none runs out"
    )
    windows = serializers.DictField(
        child=WindowForecastOutput(), help_text="only the windows forecast to run out"
    )


class ForecastFieldMixin(serializers.Serializer[Any]):
    """A ``forecast`` field from the view's ``forecasts`` context (subscription id ->
    Forecast, read in one round trip for every row): null when none holds."""

    forecast = serializers.SerializerMethodField()

    @extend_schema_field(ForecastOutput(allow_null=True))
    def get_forecast(self, obj: Any) -> dict[str, Any] | None:
        found: Forecast | None = self.context.get("forecasts", {}).get(obj.subscription.pk)
        if found is None:
            return None
        earliest = min((w.exhausts_at for w in found.windows.values()), default=None)
        payload = {
            "computed_at": found.computed_at,
            "runs_out_at": earliest,
            "windows": dict(found.windows),
        }
        data: dict[str, Any] = ForecastOutput(payload).data
        return data


def _forecasts(subscription_ids: list[int], now: datetime) -> dict[str, Any]:
    return {"forecasts": headroom_forecasts_get(subscription_ids, now=now)}


class LastProbeOutput(serializers.ModelSerializer[HeadroomSample]):
    class Meta:
        model = HeadroomSample
        fields = ["fetched_at", "status", "source", "detail"]


class UsageOutput(ForecastFieldMixin, serializers.Serializer[Any]):
    subscription_id = serializers.IntegerField(source="subscription.pk")
    name = serializers.CharField(source="subscription.name")
    provider = serializers.CharField(source="subscription.provider")
    headroom = HeadroomOutput()
    observed = serializers.JSONField(
        help_text="turns, tokens and cost this subscription served over the last 5h and 7d, "
        "and per agent over 7d (from executions): per_agent is a list of {name, owner, "
        "turns, input_tokens, output_tokens, cost_usd}, one per agent (owner null for a "
        "deleted agent's turns)"
    )
    failures_24h = serializers.DictField(child=serializers.IntegerField())
    rate_limited_now = serializers.BooleanField()
    rate_limited_source = serializers.CharField(help_text="reading | events")
    last_probe = LastProbeOutput(allow_null=True)


class SubscriptionUsageApi(APIView):
    """GET the headroom, refusals and rate-limit state of one visible subscription."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=UsageOutput)
    def get(self, request: Request, pk: int) -> Response:
        subscription = subscription_get_visible(user=request.user, pk=pk)
        now = clock.now()
        usage = headroom_usage_get(subscription=subscription, now=now, user=request.user)
        return Response(UsageOutput(usage, context=_forecasts([subscription.pk], now)).data)


class SubscriptionUsageRefreshApi(APIView):
    """POST: probe now. Anyone who can see the subscription may ask; the floor bounds it."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=None,
        responses={
            200: UsageOutput,
            429: OpenApiResponse(
                ErrorOutput, description="probed too recently; Retry-After says when to ask"
            ),
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        subscription = subscription_get_visible(user=request.user, pk=pk)
        now = clock.now()
        headroom_refresh(subscription=subscription, now=now)  # ProbeTooSoon: 429 + Retry-After
        usage = headroom_usage_get(subscription=subscription, now=now, user=request.user)
        return Response(UsageOutput(usage, context=_forecasts([subscription.pk], now)).data)


class HistorySampleOutput(serializers.ModelSerializer[HeadroomSample]):
    class Meta:
        model = HeadroomSample
        fields = ["fetched_at", "status", "five_hour", "seven_day"]


class HeadroomHistoryOutput(serializers.Serializer[Any]):
    subscription_id = serializers.IntegerField()
    window = serializers.ChoiceField(choices=list(HISTORY_WINDOWS))
    samples = HistorySampleOutput(many=True, help_text="oldest first")


class SubscriptionHeadroomHistoryApi(APIView):
    """GET ?window=24h|7d|30d: the readings of that span, oldest first, for charts."""

    permission_classes = [IsAuthenticated]

    class Input(serializers.Serializer[Any]):
        window = serializers.ChoiceField(choices=list(HISTORY_WINDOWS), default="24h")

    @extend_schema(parameters=[Input], responses=HeadroomHistoryOutput)
    def get(self, request: Request, pk: int) -> Response:
        subscription = subscription_get_visible(user=request.user, pk=pk)
        # A plain dict, not the QueryDict: DRF reads an empty value of a form as none
        # given (``?window=`` would be the default); a query's empty value is a 400.
        data = self.Input(data=request.query_params.dict())
        data.is_valid(raise_exception=True)
        window = data.validated_data["window"]
        samples = headroom_history_list(
            subscription_id=subscription.pk, window=window, now=clock.now()
        )
        return Response(
            {
                "subscription_id": subscription.pk,
                "window": window,
                "samples": HistorySampleOutput(samples, many=True).data,
            }
        )


class PressureRowOutput(ForecastFieldMixin, serializers.Serializer[Any]):
    id = serializers.IntegerField(source="subscription.pk")
    name = serializers.CharField(source="subscription.name")
    provider = serializers.CharField(source="subscription.provider")
    plan_type = serializers.CharField(source="subscription.plan_type")
    agent_count = serializers.IntegerField(source="subscription.agent_count")
    agents = AgentRefOutput(source="subscription.agents", many=True)
    headroom = HeadroomOutput()
    rate_limited_now = serializers.BooleanField()
    rate_limited_source = serializers.CharField()
    failures_24h = serializers.IntegerField()


class FleetPressureOutput(serializers.Serializer[Any]):
    store = serializers.CharField(help_text="ok | unreachable")
    summary = serializers.DictField(child=serializers.IntegerField())
    subscriptions = PressureRowOutput(source="rows", many=True)


class SubscriptionPressureApi(APIView):
    """GET the fleet view: every subscription the user may see, with its headroom."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=FleetPressureOutput)
    def get(self, request: Request) -> Response:
        now = clock.now()
        fleet = subscription_pressure_list(user=request.user, now=now)
        context = _forecasts([row.subscription.pk for row in fleet.rows], now)
        return Response(FleetPressureOutput(fleet, context=context).data)
