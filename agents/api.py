"""Agents REST API. The owner is whoever created the agent; admins see all."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

import routing.policy as policy
from agents import lifecycle, services
from agents.models import (
    CLI_TOOLS,
    RUNTIME_PROVIDER,
    Agent,
    Isolation,
    ProcessState,
    RoutingPolicy,
    Runtime,
    WaitPolicy,
)
from agents.selectors import agent_get_visible, agents_visible_to
from agents.week_plan_store import planned_json, planned_read, planned_read_many
from routing.plan_ahead.week_plan import KINDS
from trinity import clock
from trinity.models import SystemSettings
from trinity.node_labels import MAX_LABELS, NAME_PATTERN, VALUE_PATTERN, placement_problem
from trinity.schema import CONFLICT
from trinity.selectors import system_settings_get

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


# The placement as the schema describes it. OpenAPI 3.0 cannot say what a key looks like
# (no ``propertyNames``): the description does, and the server checks both.
PLACEMENT_HELP = (
    "node label name -> value a node must carry for the agent's server to run there, "
    f"at most {MAX_LABELS}; names match ^{NAME_PATTERN}$ (e.g. trinity.pool), values "
    f"^{VALUE_PATTERN}$. The swarm runtime places the agent by the constraints "
    "node.labels.<name>==<value>; the local and docker runtimes ignore it."
)
PLACEMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "maxProperties": MAX_LABELS,
    "additionalProperties": {
        "type": "string",
        "minLength": 1,
        "maxLength": 63,
        "pattern": f"^{VALUE_PATTERN}$",
    },
    "example": {"trinity.pool": "gpu-less"},
}


@extend_schema_field(PLACEMENT_SCHEMA)
class PlacementField(serializers.JSONField):
    """An agent's placement, checked whole by ``placement_problem``: no coercion (a
    number is no value, a padded value is not trimmed), so what is stored is exactly
    what was checked."""

    def to_internal_value(self, data: Any) -> dict[str, str]:
        problem = placement_problem(data)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return dict(data)


class PlatformKeyOutput(serializers.Serializer[Any]):
    allowed = serializers.BooleanField(
        help_text="whether this agent's turns may reach the platform key now"
    )
    reason = serializers.ChoiceField(
        choices=[r.value for r in policy.KeyRefusal],
        allow_null=True,
        help_text="why not: the admin's fallback is off (a ceiling no agent flag widens), "
        "no key, the policy, the agent's own opt-out, or the runtime",
    )


def _effective_usd(*caps: Decimal | None) -> str | None:
    tightest = policy.tightest_budget(caps)
    return None if tightest is None else f"{tightest:.2f}"


class PlannedOutput(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(choices=KINDS)
    subscription_id = serializers.IntegerField(allow_null=True)
    where = serializers.CharField(help_text="the plan's name, or 'the platform key'")
    until = serializers.DateTimeField()
    because = serializers.CharField()
    made_at = serializers.DateTimeField()
    text = serializers.CharField(help_text="the explainer's line")


class AgentRefOutput(serializers.Serializer[Any]):
    """An agent as another resource lists it: its name and its owner. Names are unique
    per owner only, so the pair is what addresses it (``/api/agents/<name>?owner=``)."""

    name = serializers.CharField()
    owner = serializers.CharField(source="owner.username")


class AgentOutput(serializers.ModelSerializer[Agent]):
    owner = serializers.CharField(source="owner.username", read_only=True)
    provider = serializers.ChoiceField(
        choices=sorted(set(RUNTIME_PROVIDER.values())),
        read_only=True,
        help_text="whose plans and platform key the agent's turns spend: its runtime's "
        "provider (a Claude agent never walks to a Codex plan, nor the reverse)",
    )
    subscription = serializers.SerializerMethodField()
    planned = serializers.SerializerMethodField(
        help_text="where the week plan places the agent's turns and until when (null: no "
        "current plan for it; its turns follow today's rules)"
    )
    platform_key = serializers.SerializerMethodField()
    effective_key_budget_daily_usd = serializers.SerializerMethodField(
        help_text="the tightest of the owner's, the admin's and the fleet's daily cap"
    )
    effective_key_budget_monthly_usd = serializers.SerializerMethodField(
        help_text="the tightest of the owner's, the admin's and the fleet's monthly cap"
    )
    placement = PlacementField(read_only=True, help_text=PLACEMENT_HELP)
    isolation = serializers.ChoiceField(
        choices=[*Isolation.choices, ("", "not reported yet")],
        read_only=True,
        help_text="how the agent's CLI is contained: sandbox (an OS user of its own, in "
        "its own network, process and mount namespaces, reaching only its forwarder), "
        "container (an OS user of its own in a container of its own: the docker runtime, "
        "one agent per container), separate-user (an OS user of its own on the host's "
        "network and process table: not contained), same-user (the weak mode: it could "
        "read the server's memory), or empty until a server has reported it",
    )

    class Meta:
        model = Agent
        fields = [
            "name",
            "owner",
            "runtime",
            "provider",
            "model",
            "subscription",
            "planned",
            "use_platform_api_key",
            "routing_policy",
            "wait_policy",
            "max_wait_seconds",
            "key_budget_daily_usd",
            "key_budget_monthly_usd",
            "admin_key_budget_daily_usd",
            "admin_key_budget_monthly_usd",
            "effective_key_budget_daily_usd",
            "effective_key_budget_monthly_usd",
            "platform_key",
            "allowed_tools",
            "placement",
            "endpoint",
            "process_state",
            "process_detail",
            "auth_mode",
            "isolation",
            "last_switch",
            "on_api_key_since",
            "created_at",
            "updated_at",
        ]

    def get_subscription(self, obj: Agent) -> dict[str, Any] | None:
        if obj.subscription is None:
            return None
        return {"id": obj.subscription.pk, "name": obj.subscription.name}

    @extend_schema_field(PlannedOutput(allow_null=True))
    def get_planned(self, obj: Agent) -> dict[str, Any] | None:
        # A list reads every row's entry in one round trip first (``AgentListApi.get``).
        context = self.context
        if "planned" in context:
            entry = context["planned"].get(obj.pk)
        else:
            entry = planned_read(obj.pk)
        now = context.get("now") or clock.now()
        return planned_json(entry) if entry is not None and entry.current(now) else None

    def _system(self) -> SystemSettings:
        # Read once per response, a list's rows included (they share the root's context).
        context = self.context
        if "system" not in context:
            context["system"] = system_settings_get()
        system: SystemSettings = context["system"]
        return system

    @extend_schema_field(PlatformKeyOutput)
    def get_platform_key(self, obj: Agent) -> dict[str, Any]:
        verdict = policy.agent_key_verdict(obj, self._system())
        reason = verdict.refusal.value if verdict.refusal is not None else None
        return {"allowed": verdict.allowed, "reason": reason}

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_effective_key_budget_daily_usd(self, obj: Agent) -> str | None:
        return _effective_usd(
            obj.key_budget_daily_usd,
            obj.admin_key_budget_daily_usd,
            self._system().key_budget_daily_usd,
        )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_effective_key_budget_monthly_usd(self, obj: Agent) -> str | None:
        return _effective_usd(
            obj.key_budget_monthly_usd,
            obj.admin_key_budget_monthly_usd,
            self._system().key_budget_monthly_usd,
        )


class AgentUpdateInput(serializers.Serializer[Any]):
    runtime = serializers.ChoiceField(choices=Runtime.choices, required=False)
    model = serializers.CharField(max_length=100, allow_blank=True, required=False)
    use_platform_api_key = serializers.BooleanField(
        allow_null=True,
        required=False,
        help_text="false: this agent never bills the platform key; null: follow the system's "
        "API-key fallback (true means the same as null: an agent cannot widen the admin's "
        "switch)",
    )
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
    admin_key_budget_daily_usd = serializers.DecimalField(
        **USD_INPUT,
        help_text="admins only: the daily cap the owner's cannot raise or clear; null: none",
    )
    admin_key_budget_monthly_usd = serializers.DecimalField(
        **USD_INPUT,
        help_text="admins only: the monthly cap the owner's cannot raise or clear; null: none",
    )

    allowed_tools = serializers.ListField(
        child=serializers.ChoiceField(choices=CLI_TOOLS),
        max_length=len(CLI_TOOLS),
        required=False,
        help_text="Claude Code CLI tools the agent's turns may run without approval "
        "(passed as --allowedTools; the agent restarts); empty: the CLI's default, which "
        "denies every tool that needs approval",
    )

    placement = PlacementField(
        required=False, help_text=f"{PLACEMENT_HELP} Empty: anywhere. A change restarts it."
    )

    def validate_allowed_tools(self, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise serializers.ValidationError("each tool at most once")
        return value

    def validate_use_platform_api_key(self, value: bool | None) -> bool | None:
        # Only False narrows; True could not widen the system's switch, so it is stored
        # as what it means (follow the system).
        return False if value is False else None


def _refuse_admin_fields(request: Request, fields: Any) -> None:
    """403 when a non-admin writes the admin's caps on an agent (``policy``)."""
    refused = policy.agent_fields_refused(
        fields=fields, is_admin=bool(getattr(request.user, "is_staff", False))
    )
    if refused:
        raise PermissionDenied(f"Only an admin may set {', '.join(refused)}.")


class AgentListApi(APIView):
    class Input(AgentUpdateInput):
        name = serializers.SlugField(max_length=100)
        runtime = serializers.ChoiceField(choices=Runtime.choices, default=Runtime.CLAUDE_CODE)
        # Give the new agent the best-ranked subscription of its provider (by headroom).
        auto_assign = serializers.BooleanField(default=True)

    @extend_schema(responses=AgentOutput(many=True))
    def get(self, request: Request) -> Response:
        agents = list(agents_visible_to(request.user))
        # Each agent's week-plan entry: one cache read for the page, not one per row.
        context = {"planned": planned_read_many(a.pk for a in agents), "now": clock.now()}
        return Response(AgentOutput(agents, many=True, context=context).data)

    @extend_schema(request=Input, responses={201: AgentOutput, 409: CONFLICT})
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        _refuse_admin_fields(request, data.validated_data)
        owner = request.user
        assert isinstance(owner, User)  # IsAuthenticated ran first
        agent = services.agent_create(owner=owner, **data.validated_data)
        return Response(AgentOutput(agent).data, status=status.HTTP_201_CREATED)


class AgentDetailApi(APIView):
    @extend_schema(responses=AgentOutput)
    def get(self, request: Request, name: str) -> Response:
        return Response(
            AgentOutput(
                agent_get_visible(
                    user=request.user, name=name, owner=request.query_params.get("owner")
                )
            ).data
        )

    @extend_schema(request=AgentUpdateInput, responses=AgentOutput)
    def patch(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        data = AgentUpdateInput(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        _refuse_admin_fields(request, data.validated_data)
        agent = services.agent_update(agent=agent, changes=data.validated_data)
        return Response(AgentOutput(agent).data)

    put = patch

    @extend_schema(responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        services.agent_delete(
            agent=agent_get_visible(
                user=request.user, name=name, owner=request.query_params.get("owner")
            )
        )
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
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
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
        agent = lifecycle.agent_stop(
            agent=agent_get_visible(
                user=request.user, name=name, owner=request.query_params.get("owner")
            )
        )
        return Response(AgentOutput(agent).data)


class AgentHealthOutput(serializers.Serializer[Any]):
    state = serializers.ChoiceField(choices=ProcessState.choices, help_text="the recorded state")
    alive = serializers.BooleanField(help_text="whether the server process is alive")
    server = serializers.DictField(required=False, help_text="the agent server's own /health")
    error = serializers.CharField(required=False, help_text="why the server did not answer")


class AgentHealthApi(APIView):
    @extend_schema(responses=AgentHealthOutput)
    def get(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        return Response(lifecycle.agent_health(agent=agent))
