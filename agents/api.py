"""Agents REST API. The owner is whoever created the agent; admins see all."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import lifecycle, services
from agents.models import CLI_TOOLS, Agent, ProcessState, RoutingPolicy, Runtime, WaitPolicy
from agents.selectors import agent_get_visible, agents_visible_to
from trinity.schema import CONFLICT

# A parked turn waits at most a week: longer than any provider window (7 days).
MAX_WAIT_SECONDS_MAX = 7 * 24 * 3600
# Dollars as decimal strings (never floats), within the model's 12 digits and 2 places.
USD_INPUT: dict[str, Any] = {
    "max_digits": 12,
    "decimal_places": 2,
    "min_value": Decimal("0"),
    "allow_null": True,
    "required": False,
}


class AgentOutput(serializers.ModelSerializer[Agent]):
    owner = serializers.CharField(source="owner.username", read_only=True)
    subscription = serializers.SerializerMethodField()

    class Meta:
        model = Agent
        fields = [
            "name",
            "owner",
            "runtime",
            "model",
            "subscription",
            "use_platform_api_key",
            "routing_policy",
            "wait_policy",
            "max_wait_seconds",
            "key_budget_daily_usd",
            "key_budget_monthly_usd",
            "allowed_tools",
            "endpoint",
            "process_state",
            "process_detail",
            "auth_mode",
            "last_switch",
            "on_api_key_since",
            "created_at",
            "updated_at",
        ]

    def get_subscription(self, obj: Agent) -> dict[str, Any] | None:
        if obj.subscription is None:
            return None
        return {"id": obj.subscription.pk, "name": obj.subscription.name}


class AgentUpdateInput(serializers.Serializer[Any]):
    runtime = serializers.ChoiceField(choices=Runtime.choices, required=False)
    model = serializers.CharField(max_length=100, allow_blank=True, required=False)
    use_platform_api_key = serializers.BooleanField(allow_null=True, required=False)
    routing_policy = serializers.ChoiceField(
        choices=RoutingPolicy.choices,
        required=False,
        help_text="thrifty: plans first, the platform API key last; subscription-only: only "
        "plans that refuse past their quota, never the key; pinned: never leaves its "
        "subscription. Unset on create: the system default.",
    )
    wait_policy = serializers.ChoiceField(
        choices=WaitPolicy.choices,
        required=False,
        help_text="what an autonomous turn does when every credential refused: wait (park "
        "until the earliest known reset) or fail",
    )
    max_wait_seconds = serializers.IntegerField(
        min_value=0,
        max_value=MAX_WAIT_SECONDS_MAX,
        required=False,
        help_text="an autonomous turn parks only for a reset at most this long after it was "
        "created (0 to 7 days)",
    )
    key_budget_daily_usd = serializers.DecimalField(
        **USD_INPUT, help_text="what the platform key may bill for this agent per day; null: no cap"
    )
    key_budget_monthly_usd = serializers.DecimalField(
        **USD_INPUT,
        help_text="what the platform key may bill for this agent per month; null: no cap",
    )

    allowed_tools = serializers.ListField(
        child=serializers.ChoiceField(choices=CLI_TOOLS),
        max_length=len(CLI_TOOLS),
        required=False,
        help_text="Claude Code CLI tools the agent's turns may run without approval "
        "(passed as --allowedTools; the agent restarts); empty: the CLI's default, which "
        "denies every tool that needs approval",
    )

    def validate_allowed_tools(self, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise serializers.ValidationError("each tool at most once")
        return value


class AgentListApi(APIView):
    class Input(AgentUpdateInput):
        name = serializers.SlugField(max_length=100)
        runtime = serializers.ChoiceField(choices=Runtime.choices, default=Runtime.CLAUDE_CODE)
        # Give the new agent the best-ranked subscription of its provider (by headroom).
        auto_assign = serializers.BooleanField(default=True)

    @extend_schema(responses=AgentOutput(many=True))
    def get(self, request: Request) -> Response:
        return Response(AgentOutput(agents_visible_to(request.user), many=True).data)

    @extend_schema(request=Input, responses={201: AgentOutput, 409: CONFLICT})
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        owner = request.user
        assert isinstance(owner, User)  # IsAuthenticated ran first
        agent = services.agent_create(owner=owner, **data.validated_data)
        return Response(AgentOutput(agent).data, status=status.HTTP_201_CREATED)


class AgentDetailApi(APIView):
    @extend_schema(responses=AgentOutput)
    def get(self, request: Request, name: str) -> Response:
        return Response(AgentOutput(agent_get_visible(user=request.user, name=name)).data)

    @extend_schema(request=AgentUpdateInput, responses=AgentOutput)
    def patch(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(user=request.user, name=name)
        data = AgentUpdateInput(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        agent = services.agent_update(agent=agent, changes=data.validated_data)
        return Response(AgentOutput(agent).data)

    put = patch

    @extend_schema(responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        services.agent_delete(agent=agent_get_visible(user=request.user, name=name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentStartApi(APIView):
    @extend_schema(
        request=None,
        responses={
            200: AgentOutput,
            503: OpenApiResponse(
                AgentOutput,
                description="The server could not be started: process_state is failed and "
                "process_detail says why.",
            ),
        },
    )
    def post(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(user=request.user, name=name)
        try:
            agent = lifecycle.agent_start(agent=agent)
        except lifecycle.AgentStartFailed:
            # The runtime could not bring the server up; agent_start recorded the
            # failed state and logged why. Anything else is a bug and stays a 500.
            agent.refresh_from_db()
            return Response(AgentOutput(agent).data, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response(AgentOutput(agent).data)


class AgentStopApi(APIView):
    @extend_schema(request=None, responses=AgentOutput)
    def post(self, request: Request, name: str) -> Response:
        agent = lifecycle.agent_stop(agent=agent_get_visible(user=request.user, name=name))
        return Response(AgentOutput(agent).data)


class AgentHealthOutput(serializers.Serializer[Any]):
    state = serializers.ChoiceField(choices=ProcessState.choices, help_text="the recorded state")
    alive = serializers.BooleanField(help_text="whether the server process is alive")
    server = serializers.DictField(required=False, help_text="the agent server's own /health")
    error = serializers.CharField(required=False, help_text="why the server did not answer")


class AgentHealthApi(APIView):
    @extend_schema(responses=AgentHealthOutput)
    def get(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(user=request.user, name=name)
        return Response(lifecycle.agent_health(agent=agent))
