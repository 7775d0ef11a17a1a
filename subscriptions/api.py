"""Subscriptions REST API: thin views over services and selectors."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, ClassVar

from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import lifecycle
from agents.api import AgentRefOutput
from agents.selectors import agent_get_visible
from routing import providers
from routing.providers import platform_key_configured
from subscriptions import services
from subscriptions.key_refusals import key_refusal_view
from subscriptions.models import Provider, Subscription
from subscriptions.retry import platform_key_retry_now, subscription_retry_now
from subscriptions.selectors import subscription_get_visible, subscriptions_visible_to
from trinity import clock
from trinity import services as trinity_services
from trinity.api import MAX_ID, AdminForWrites, IsAdmin, name_field
from trinity.models import RoutingPolicy, RoutingStrategy
from trinity.schema import CONFLICT
from trinity.selectors import system_settings_get


class SubscriptionOutput(serializers.ModelSerializer[Subscription]):
    agent_count = serializers.IntegerField(read_only=True)
    agents = AgentRefOutput(
        many=True,
        read_only=True,
        help_text="the agents on it that the caller may see, each with its owner",
    )

    class Meta:
        model = Subscription
        fields = [
            "id",
            "name",
            "provider",
            "plan_type",
            "token_fingerprint",
            "billing_class",
            "overage",
            "max_concurrency",
            "paused_at",
            "paused_by",
            "agent_count",
            "agents",
            "created_at",
            "updated_at",
        ]


class SubscriptionListApi(APIView):
    permission_classes = [AdminForWrites]

    class Input(serializers.Serializer[Any]):
        name = name_field(max_length=100)
        # A Codex plan's credential is the whole auth.json `codex login` wrote (three
        # JWTs and a refresh token: a few kilobytes, on several lines).
        token = serializers.CharField(write_only=True, max_length=16384, trim_whitespace=True)
        provider = serializers.ChoiceField(choices=Provider.choices)
        plan_type = serializers.CharField(max_length=30)

    @extend_schema(responses=SubscriptionOutput(many=True))
    def get(self, request: Request) -> Response:
        subscriptions = subscriptions_visible_to(request.user)
        return Response(SubscriptionOutput(subscriptions, many=True).data)

    @extend_schema(
        request=Input,
        responses={200: SubscriptionOutput, 201: SubscriptionOutput, 409: CONFLICT},
    )
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        subscription, created = services.subscription_register(**data.validated_data)
        subscription = subscription_get_visible(user=request.user, pk=subscription.pk)
        return Response(
            SubscriptionOutput(subscription).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class SubscriptionDetailApi(APIView):
    """GET one plan; PATCH ``{paused}`` pauses or resumes it; DELETE removes it. Writes
    are an admin's: the pool is shared by every operator's agents."""

    permission_classes = [AdminForWrites]

    class Input(serializers.Serializer[Any]):
        paused = serializers.BooleanField(
            help_text="true: no turn, walk or placement uses the plan; false: resume it"
        )

    @extend_schema(responses=SubscriptionOutput)
    def get(self, request: Request, pk: int) -> Response:
        subscription = subscription_get_visible(user=request.user, pk=pk)
        return Response(SubscriptionOutput(subscription).data)

    @extend_schema(request=Input, responses=SubscriptionOutput)
    def patch(self, request: Request, pk: int) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        services.subscription_pause_set(
            subscription=subscription_get_visible(user=request.user, pk=pk),
            paused=data.validated_data["paused"],
            actor=request.user.get_username(),
            now=clock.now(),
        )
        subscription = subscription_get_visible(user=request.user, pk=pk)
        return Response(SubscriptionOutput(subscription).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        services.subscription_delete(
            subscription=subscription_get_visible(user=request.user, pk=pk)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class AssignmentOutput(serializers.Serializer[Any]):
    agent = serializers.CharField(source="name")
    subscription_id = serializers.IntegerField(allow_null=True)


class AgentAssignmentApi(APIView):
    """Assign or unassign an agent's subscription: the agent's owner or an admin."""

    permission_classes = [IsAuthenticated]

    class Input(serializers.Serializer[Any]):
        subscription_id = serializers.IntegerField(min_value=1, max_value=MAX_ID)

    @extend_schema(request=Input, responses={200: AssignmentOutput, 409: CONFLICT})
    def put(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        # Assign only what the caller may read: a hidden subscription raises the same
        # NotFound as a missing one, so the answer does not reveal which ids exist.
        subscription = subscription_get_visible(
            user=request.user, pk=data.validated_data["subscription_id"]
        )
        agent = services.assignment_set(agent=agent, subscription_id=subscription.pk)
        return Response(AssignmentOutput(agent).data)

    # 200 with the cleared assignment (drf-spectacular would call a DELETE's body a 204).
    @extend_schema(responses={200: AssignmentOutput})
    def delete(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        agent = services.assignment_clear(agent=agent)
        return Response(AssignmentOutput(agent).data)


class SwitchOutput(serializers.Serializer[Any]):
    enabled = serializers.BooleanField()


class ApiKeyFallbackOutput(SwitchOutput):
    key_configured = serializers.BooleanField(
        help_text="whether a platform API key is configured: on without one is inert"
    )


class ThresholdOutput(serializers.Serializer[Any]):
    threshold = serializers.IntegerField(help_text="0 (off) or a percentage from 50 to 99")


class KeyRefusalOutput(serializers.Serializer[Any]):
    fingerprint = serializers.CharField(help_text="the last 4 of the key that refused")
    failure_kind = serializers.CharField(allow_null=True)
    refused_at = serializers.DateTimeField()
    reopens_at = serializers.DateTimeField()


class PlatformApiKeyOutput(serializers.Serializer[Any]):
    configured = serializers.BooleanField()
    fingerprint = serializers.CharField(help_text="the key's last 4 characters, or empty")
    refusal = KeyRefusalOutput(
        allow_null=True, help_text="the configured key's refusal that closes its rung, or null"
    )


class SwitchSettingApi(APIView):
    """GET/PUT ``{enabled}`` for one boolean system setting; writes are admin-only."""

    permission_classes = [AdminForWrites]
    setting: ClassVar[str] = ""

    class Input(serializers.Serializer[Any]):
        enabled = serializers.BooleanField()

    def render(self) -> dict[str, Any]:
        return {"enabled": getattr(system_settings_get(), self.setting)}

    @extend_schema(responses=SwitchOutput)
    def get(self, request: Request) -> Response:
        return Response(self.render())

    @extend_schema(request=Input, responses=SwitchOutput)
    def put(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        trinity_services.system_setting_set(name=self.setting, value=data.validated_data["enabled"])
        return Response(self.render())


class AutoSwitchApi(SwitchSettingApi):
    setting = "auto_switch_subscriptions"


@extend_schema_view(
    get=extend_schema(responses=ApiKeyFallbackOutput),
    put=extend_schema(request=SwitchSettingApi.Input, responses=ApiKeyFallbackOutput),
)
class ApiKeyFallbackApi(SwitchSettingApi):
    setting = "subscription_api_key_fallback"

    @transaction.atomic
    def put(self, request: Request) -> Response:
        response = super().put(request)
        # The switch is a ceiling on what agents boot with too: an agent booted on the
        # key must not keep it once the admin turned the fallback off.
        lifecycle.agents_key_mode_reapply()
        return response

    def render(self) -> dict[str, Any]:
        row = system_settings_get()
        # "On but inert" is a real state: the switch is on and no key is configured (the
        # switch is every provider's: one key of either provider makes it bite).
        return {
            "enabled": row.subscription_api_key_fallback,
            "key_configured": any(platform_key_configured(row, p) for p in providers.SLOTS),
        }


class HeadroomAutoRefreshApi(SwitchSettingApi):
    setting = "subscription_headroom_auto_refresh"


class HeadroomAlertThresholdApi(APIView):
    permission_classes = [AdminForWrites]

    class Input(serializers.Serializer[Any]):
        threshold = serializers.IntegerField()

    @extend_schema(responses=ThresholdOutput)
    def get(self, request: Request) -> Response:
        return Response({"threshold": system_settings_get().headroom_alert_threshold})

    @extend_schema(request=Input, responses=ThresholdOutput)
    def put(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        row = trinity_services.system_setting_set(
            name="headroom_alert_threshold", value=data.validated_data["threshold"]
        )
        return Response({"threshold": row.headroom_alert_threshold})


def _usd_field(help_text: str, **kwargs: Any) -> serializers.DecimalField:
    """Dollars as a decimal string (never a float); >= 0; null means no cap."""
    return serializers.DecimalField(
        max_digits=12,
        decimal_places=2,
        min_value=Decimal("0"),
        allow_null=True,
        help_text=help_text,
        **kwargs,
    )


class RoutingSettingsOutput(serializers.Serializer[Any]):
    default_routing_policy = serializers.ChoiceField(
        choices=RoutingPolicy.choices, help_text="the routing policy a new agent gets"
    )
    routing_strategy = serializers.ChoiceField(
        choices=RoutingStrategy.choices,
        help_text="how a walk ranks the plans it may try next: banded (by headroom band) "
        "or balanced (remaining quota per time left to each window's reset)",
    )
    key_budget_daily_usd = _usd_field("what the platform key may bill fleet-wide per day")
    key_budget_monthly_usd = _usd_field("what the platform key may bill fleet-wide per month")


class RoutingSettingsApi(APIView):
    """GET/PUT the fleet's routing settings; a PUT changes only the fields it sends."""

    permission_classes = [AdminForWrites]

    class Input(serializers.Serializer[Any]):
        default_routing_policy = serializers.ChoiceField(
            choices=RoutingPolicy.choices, required=False
        )
        routing_strategy = serializers.ChoiceField(choices=RoutingStrategy.choices, required=False)
        key_budget_daily_usd = _usd_field("null: no cap", required=False)
        key_budget_monthly_usd = _usd_field("null: no cap", required=False)

    @staticmethod
    def render() -> dict[str, Any]:
        return dict(RoutingSettingsOutput(system_settings_get()).data)

    @extend_schema(responses=RoutingSettingsOutput)
    def get(self, request: Request) -> Response:
        return Response(self.render())

    @extend_schema(request=Input, responses=RoutingSettingsOutput)
    def put(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        trinity_services.system_routing_settings_set(changes=dict(data.validated_data))
        return Response(self.render())


class RetryOutput(serializers.Serializer[Any]):
    credential = serializers.CharField(help_text="subscription | api_key")
    name = serializers.CharField()
    fingerprint = serializers.CharField(help_text="the credential's last 4")
    cleared = serializers.IntegerField(help_text="refusals cleared from the skip window")
    probe = serializers.CharField(help_text="a plan's fresh reading status, or why not probed")


class SubscriptionRetryApi(APIView):
    """POST: retry a subscription now (admin): clear its refusals, probe it, audit it."""

    permission_classes = [IsAdmin]

    @extend_schema(request=None, responses=RetryOutput)
    def post(self, request: Request, pk: int) -> Response:
        subscription = subscription_get_visible(user=request.user, pk=pk)
        result = subscription_retry_now(
            subscription=subscription, actor=request.user.get_username(), now=clock.now()
        )
        return Response(RetryOutput(result).data)


class PlatformApiKeyRetryApi(APIView):
    """POST: retry a platform key now (admin): clear its refusals, audit it. The
    Anthropic key's path, or the OpenAI key's (``provider``)."""

    permission_classes = [IsAdmin]
    provider: ClassVar[str] = providers.ANTHROPIC

    @extend_schema(request=None, responses={200: RetryOutput, 409: CONFLICT})
    def post(self, request: Request) -> Response:
        result = platform_key_retry_now(
            actor=request.user.get_username(), now=clock.now(), provider=self.provider
        )
        return Response(RetryOutput(result).data)


class OpenAIPlatformKeyRetryApi(PlatformApiKeyRetryApi):
    """POST: retry the OpenAI platform key now (admin): clear its refusals (never the
    Anthropic key's), audit it. 409 without an OpenAI key."""

    provider = providers.OPENAI


class PlatformApiKeyApi(APIView):
    """Write-only: the key goes in, only whether one is configured comes out. The
    Anthropic key (Claude agents' last rung) at this path; the OpenAI key (Codex
    agents' last rung) at ``OpenAIPlatformKeyApi``'s."""

    permission_classes = [IsAdmin]
    provider: ClassVar[str] = providers.ANTHROPIC

    class Input(serializers.Serializer[Any]):
        key = serializers.CharField(write_only=True, max_length=4096)

    def render(self) -> dict[str, Any]:
        row = system_settings_get()
        _, fingerprint = providers.platform_key(row, self.provider)
        return {
            "configured": providers.platform_key_configured(row, self.provider),
            "fingerprint": fingerprint,
            "refusal": key_refusal_view(row, now=clock.now(), provider=self.provider),
        }

    @extend_schema(responses=PlatformApiKeyOutput)
    def get(self, request: Request) -> Response:
        return Response(self.render())

    @extend_schema(request=Input, responses=PlatformApiKeyOutput)
    def put(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        with transaction.atomic():
            trinity_services.platform_api_key_set(
                key=data.validated_data["key"], provider=self.provider
            )
            lifecycle.agents_key_mode_reapply()
        return Response(self.render())

    # 200 with the (now unconfigured) state rather than a bodiless 204.
    @extend_schema(responses={200: PlatformApiKeyOutput})
    def delete(self, request: Request) -> Response:
        with transaction.atomic():
            trinity_services.platform_api_key_clear(provider=self.provider)
            lifecycle.agents_key_mode_reapply()  # a removed key leaves no agent booted on it
        return Response(self.render())


@extend_schema_view(
    get=extend_schema(
        summary="The OpenAI platform key's state (admin): configured and fingerprint, "
        "never the key",
        responses=PlatformApiKeyOutput,
    ),
    put=extend_schema(
        summary="Set or replace the OpenAI platform key (admin; write-only): an OpenAI "
        "API key (sk-proj-…, sk-svcacct-…), never an Anthropic one",
        request=PlatformApiKeyApi.Input,
        responses=PlatformApiKeyOutput,
    ),
    delete=extend_schema(
        summary="Remove the OpenAI platform key (admin); the Anthropic key stays",
        responses={200: PlatformApiKeyOutput},
    ),
)
class OpenAIPlatformKeyApi(PlatformApiKeyApi):
    """The OpenAI platform key: Codex agents' last rung, set and cleared beside the
    Anthropic key and never offered to a Claude agent."""

    provider = providers.OPENAI


class OpenAIKeyBudgetsOutput(serializers.Serializer[Any]):
    key_budget_daily_usd = _usd_field(
        "what the OpenAI platform key may bill fleet-wide per day",
        source="openai_key_budget_daily_usd",
    )
    key_budget_monthly_usd = _usd_field(
        "what the OpenAI platform key may bill fleet-wide per month",
        source="openai_key_budget_monthly_usd",
    )


class OpenAIKeyBudgetsApi(APIView):
    """GET/PUT the OpenAI platform key's fleet-wide budgets (admin-only writes; a PUT
    changes only the fields it sends). Its own ledger: what the Anthropic key spends
    never counts against these, nor the reverse (the Anthropic key's are the routing
    settings' ``key_budget_*``)."""

    permission_classes = [AdminForWrites]

    class Input(serializers.Serializer[Any]):
        key_budget_daily_usd = _usd_field("null: no cap", required=False)
        key_budget_monthly_usd = _usd_field("null: no cap", required=False)

    @staticmethod
    def render() -> dict[str, Any]:
        return dict(OpenAIKeyBudgetsOutput(system_settings_get()).data)

    @extend_schema(responses=OpenAIKeyBudgetsOutput)
    def get(self, request: Request) -> Response:
        return Response(self.render())

    @extend_schema(request=Input, responses=OpenAIKeyBudgetsOutput)
    def put(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        changes = {f"openai_{name}": value for name, value in data.validated_data.items()}
        trinity_services.system_routing_settings_set(changes=changes)
        return Response(self.render())
