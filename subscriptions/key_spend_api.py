"""Key budgets over REST: what the platform key spent in the current day and month,
fleet-wide and per agent, against the caps (read-only; the caps are set through the
agent and routing-settings APIs)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.selectors import agents_visible_to
from routing.providers import fleet_scope_provider, is_fleet_scope
from subscriptions.key_spend import key_budget_lines
from trinity import clock
from trinity.selectors import system_settings_get


class BudgetLineOutput(serializers.Serializer[Any]):
    scope = serializers.CharField(
        help_text="fleet (the Anthropic platform key's fleet), fleet:openai-codex (the "
        "OpenAI platform key's fleet) or agent:<id>"
    )
    provider = serializers.SerializerMethodField(
        help_text="whose platform key a fleet line caps (anthropic | openai-codex); null "
        "on an agent's line (the agent's own provider's key)"
    )
    agent = serializers.CharField(source="agent_name")
    owner = serializers.CharField(
        source="agent_owner",
        allow_null=True,
        help_text="the agent's owner on an agent's line (names are unique per owner "
        "only); null on a fleet line",
    )
    period = serializers.CharField()
    starts_on = serializers.DateField()
    reopens_at = serializers.DateTimeField()
    budget_usd = serializers.DecimalField(
        source="limit_usd", max_digits=14, decimal_places=2, allow_null=True
    )
    spent_usd = serializers.DecimalField(
        max_digits=14,
        decimal_places=6,
        allow_null=True,
        help_text="null on the fleet's lines for a non-admin: the fleet's spend is every "
        "owner's turns",
    )
    reserved_usd = serializers.DecimalField(max_digits=14, decimal_places=6, allow_null=True)
    remaining_usd = serializers.DecimalField(max_digits=14, decimal_places=6, allow_null=True)
    closed = serializers.BooleanField()

    def get_provider(self, instance: Any) -> str | None:
        return fleet_scope_provider(instance.scope)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        if is_fleet_scope(instance.scope) and not self.context.get("admin", False):
            # The cap and whether it is closed are the shared ceiling everyone's key
            # turns meet; what it has spent is a sum of other owners' turns.
            data.update(spent_usd=None, reserved_usd=None, remaining_usd=None)
        return data


class KeyBudgetsApi(APIView):
    """``GET /api/budgets``: the fleet's lines and those of the caller's visible agents
    that have a cap; ``closed`` means the key rung is closed for them now."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=BudgetLineOutput(many=True))
    def get(self, request: Request) -> Response:
        lines = key_budget_lines(
            agents=agents_visible_to(request.user)
            .select_related(None)
            .select_related("owner")
            .only(
                "pk",
                "name",
                "owner__username",
                "key_budget_daily_usd",
                "key_budget_monthly_usd",
                "admin_key_budget_daily_usd",
                "admin_key_budget_monthly_usd",
            ),
            system=system_settings_get(),
            now=clock.now(),
        )
        admin = bool(getattr(request.user, "is_staff", False))
        return Response(BudgetLineOutput(lines, many=True, context={"admin": admin}).data)
