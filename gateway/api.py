"""Gateway REST API: people's gateway keys, what they used, and the open requests.

Every signed-in user manages their own keys; an admin sees and manages everyone's
(``?owner=<username>`` narrows a list to one person's). A key's secret is in the
create answer and nowhere else. Who may loosen a key's restrictions:
``gateway/key_rules.py``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from typing import Any, Final

from django.contrib.auth.models import User
from django.utils.cache import add_never_cache_headers
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway import catalog
from gateway.key_rules import loosened_fields
from gateway.keys import (
    KEY_PREFIX,
    LIMIT_FIELDS,
    gateway_key_create,
    gateway_key_revoke,
    gateway_key_update,
)
from gateway.models import PROVIDERS, GatewayKey
from gateway.open_streams import OpenStream
from gateway.selectors import (
    KEY_STATUSES,
    gateway_key_get_visible,
    gateway_key_status,
    gateway_keys_listed,
    gateway_keys_visible_to,
    gateway_usage_summary,
)
from gateway.streams import StreamsUnavailable, open_streams_list
from subscriptions.models import Provider
from trinity import clock
from trinity.api import MAX_ID, USERNAME_PATTERN, name_field
from trinity.errors import DomainError, InvalidInput
from trinity.pagination import query_instant
from trinity.schema import CONFLICT, ErrorOutput

FAMILY_CHOICES: Final = [family for names in catalog.FAMILIES.values() for family in names]
# The database's ceilings (PositiveIntegerField, PositiveBigIntegerField): beyond them
# Postgres refuses the write, so the API refuses the value first, by its field.
INT_MAX: Final = 2**31 - 1
BIGINT_MAX: Final = 2**63 - 1
USAGE_DEFAULT_DAYS: Final = 30
USERNAME: Final = re.compile(USERNAME_PATTERN)
# An instant as RFC 3339 writes it (the schema's date-time): with its offset.
INSTANT: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)
OWNER_FILTER = OpenApiParameter(
    "owner",
    str,
    description="a username: only that person's keys (an admin's filter; an operator "
    "naming anyone but themselves gets none)",
)


class StreamsUnreadable(DomainError):
    """The open streams could not be read: the gateway or Redis is down. Nothing is
    wrong with the request; asking again later may work."""

    status_code = 503
    code = "streams_unavailable"


class GatewayKeyOutput(serializers.ModelSerializer[GatewayKey]):
    """A key as every answer shows it: never its secret or digest, only ``prefix`` (the
    characters after ``trinity-gw-`` that tell it apart in a list)."""

    owner = serializers.CharField(source="owner.username", read_only=True)
    created_by = serializers.CharField(
        source="created_by.username",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="who created it (the owner, or an admin for them); null once deleted",
    )
    status = serializers.SerializerMethodField()
    providers = serializers.ListField(
        child=serializers.ChoiceField(choices=Provider.choices),
        help_text="the providers it may reach; empty: every one",
    )
    model_families = serializers.ListField(
        child=serializers.ChoiceField(choices=FAMILY_CHOICES),
        help_text="the model families it may use; empty: every one",
    )

    class Meta:
        model = GatewayKey
        fields = [
            "id",
            "name",
            "owner",
            "prefix",
            "status",
            "created_by",
            "created_at",
            "updated_at",
            "expires_at",
            "revoked_at",
            "providers",
            "model_families",
            *LIMIT_FIELDS,
        ]
        read_only_fields = fields

    @extend_schema_field(
        serializers.ChoiceField(
            choices=KEY_STATUSES,
            help_text="active; expired (from expires_at on); revoked (from revoked_at on)",
        )
    )
    def get_status(self, obj: GatewayKey) -> str:
        return gateway_key_status(obj, now=self.context.get("now") or clock.now())


class GatewayKeyCreatedOutput(GatewayKeyOutput):
    """The one answer that carries the key itself."""

    key = serializers.CharField(
        read_only=True,
        help_text=f"the key ({KEY_PREFIX}…): send it as the API key or Bearer token to the "
        "gateway. Shown only in this answer: only its digest is kept.",
    )

    class Meta(GatewayKeyOutput.Meta):
        fields = [*GatewayKeyOutput.Meta.fields, "key"]
        read_only_fields = fields


class InstantField(serializers.DateTimeField):
    """An aware ISO 8601 instant, and nothing around it: Python's parser stops at a
    NUL and takes what came before, and a time without its offset would be read in
    the server's zone."""

    def to_internal_value(self, value: Any) -> Any:
        if not isinstance(value, str) or not INSTANT.fullmatch(value):
            raise serializers.ValidationError(
                "Give an ISO 8601 instant with its offset, e.g. 2026-12-31T23:59:00Z."
            )
        return super().to_internal_value(value)


def _limit(maximum: int, help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        min_value=1, max_value=maximum, allow_null=True, required=False, help_text=help_text
    )


def _usd(help_text: str) -> serializers.DecimalField:
    # Dollars as a decimal string (never a float), in the column's precision.
    return serializers.DecimalField(
        max_digits=12,
        decimal_places=4,
        min_value=Decimal("0.0001"),
        allow_null=True,
        required=False,
        help_text=help_text,
    )


class GatewayKeyChangeInput(serializers.Serializer[Any]):
    """A key's changeable fields. Each limit is off when null; an operator may only
    tighten a key they already have (``gateway/key_rules.py``)."""

    name = name_field(max_length=100, required=False)
    expires_at = InstantField(
        allow_null=True, required=False, help_text="refused from this instant on; null: never"
    )
    providers = serializers.ListField(
        child=serializers.ChoiceField(choices=Provider.choices),
        max_length=len(PROVIDERS),
        required=False,
        help_text="the providers it may reach; empty: every one",
    )
    model_families = serializers.ListField(
        child=serializers.ChoiceField(choices=FAMILY_CHOICES),
        max_length=len(FAMILY_CHOICES),
        required=False,
        help_text="the model families it may use; empty: every one",
    )
    requests_per_minute = _limit(INT_MAX, "requests it may start per minute; null: no limit")
    max_streams = _limit(INT_MAX, "requests it may have open at once; null: no limit")
    daily_tokens = _limit(BIGINT_MAX, "tokens it may use per UTC day; null: no limit")
    monthly_tokens = _limit(BIGINT_MAX, "tokens it may use per UTC month; null: no limit")
    daily_usd = _usd("list-price dollars it may use per UTC day; null: no limit")
    monthly_usd = _usd("list-price dollars it may use per UTC month; null: no limit")

    def _once_each(self, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise serializers.ValidationError("Name each at most once.")
        return value

    def validate_providers(self, value: list[str]) -> list[str]:
        return self._once_each(value)

    def validate_model_families(self, value: list[str]) -> list[str]:
        return self._once_each(value)


def _caller(request: Request) -> User:
    user = request.user
    assert isinstance(user, User)  # IsAuthenticated ran first
    return user


def _owner_param(request: Request) -> str | None:
    """``?owner=``: a username (a 400 naming it otherwise: it goes into a query)."""
    owner = request.query_params.get("owner")
    if owner is not None and not USERNAME.match(owner):
        raise InvalidInput("Not a username: letters, digits and . @ + - _ only.", field="owner")
    return owner


def _new_key_owner(request: Request, username: str | None) -> User:
    """Whom a new key is for: the caller, or (an admin's choice only) ``username``."""
    caller = _caller(request)
    if username is None or username == caller.username:
        return caller
    if not caller.is_staff:
        raise PermissionDenied("Only an admin may create a key for someone else.")
    owner = User.objects.filter(username=username).first()
    if owner is None:
        raise InvalidInput(f"No user named {username!r}.", field="owner")
    return owner


def _key_output(key: GatewayKey) -> dict[str, Any]:
    return dict(GatewayKeyOutput(key, context={"now": clock.now()}).data)


class GatewayKeyListApi(APIView):
    """GET the caller's keys (an admin: everyone's), newest first; POST a new one."""

    class Input(GatewayKeyChangeInput):
        name = name_field(max_length=100)
        owner = serializers.RegexField(
            USERNAME_PATTERN,
            max_length=150,
            required=False,
            error_messages={"invalid": "Not a username: letters, digits and . @ + - _ only."},
            help_text="admins only: the username the key is for; default: yourself",
        )

    @extend_schema(parameters=[OWNER_FILTER], responses=GatewayKeyOutput(many=True))
    def get(self, request: Request) -> Response:
        keys = gateway_keys_listed(user=request.user, owner=_owner_param(request))
        return Response(GatewayKeyOutput(keys, many=True, context={"now": clock.now()}).data)

    @extend_schema(request=Input, responses={201: GatewayKeyCreatedOutput, 409: CONFLICT})
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        owner = _new_key_owner(request, values.pop("owner", None))
        issued = gateway_key_create(
            owner=owner, created_by=_caller(request), now=clock.now(), **values
        )
        response = Response(
            {**_key_output(issued.row), "key": issued.key}, status=status.HTTP_201_CREATED
        )
        add_never_cache_headers(response)  # no proxy or browser cache keeps the key
        return response


class GatewayKeyDetailApi(APIView):
    """GET one key; PATCH its name, expiry, allowed providers/families or limits; DELETE
    revokes it (idempotent: 200 with the key, its ``revoked_at`` from the first time).
    A revoked key is kept, with its usage, and cannot change (409)."""

    @extend_schema(responses=GatewayKeyOutput)
    def get(self, request: Request, pk: int) -> Response:
        return Response(_key_output(gateway_key_get_visible(user=request.user, pk=pk)))

    @extend_schema(request=GatewayKeyChangeInput, responses={200: GatewayKeyOutput, 409: CONFLICT})
    def patch(self, request: Request, pk: int) -> Response:
        key = gateway_key_get_visible(user=request.user, pk=pk)
        data = GatewayKeyChangeInput(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        changes = dict(data.validated_data)
        if not _caller(request).is_staff:
            current = {name: getattr(key, name) for name in changes}
            loosened = loosened_fields(current, changes)
            if loosened:
                raise PermissionDenied(
                    f"Only an admin may raise, widen or clear {', '.join(loosened)} on a "
                    "key; you may only tighten them."
                )
        key = gateway_key_update(key=key, now=clock.now(), **changes)
        return Response(_key_output(key))

    @extend_schema(responses={200: GatewayKeyOutput})
    def delete(self, request: Request, pk: int) -> Response:
        key = gateway_key_get_visible(user=request.user, pk=pk)
        return Response(_key_output(gateway_key_revoke(key=key, now=clock.now())))


# --- usage ------------------------------------------------------------------------


def _usd_output(help_text: str) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=20, decimal_places=6, help_text=help_text)


class GatewayUsageFiguresOutput(serializers.Serializer[Any]):
    requests = serializers.IntegerField()
    refused = serializers.IntegerField(
        help_text="answered with an error status (every credential refused, an upstream "
        "failure, the key revoked meanwhile): nothing served. A limit's refusal leaves no "
        "usage (the gateway's metrics count it)"
    )
    disconnected = serializers.IntegerField(help_text="the client went away before the end")
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_write_tokens = serializers.IntegerField()
    list_usd = _usd_output("the API list price of these tokens (what a plan saved)")
    billed_usd = _usd_output("what the platform key actually billed (0 on a plan)")


class GatewayModelUsageOutput(GatewayUsageFiguresOutput):
    model = serializers.CharField(help_text="as the client named it; empty when it named none")


class GatewayServedByUsageOutput(GatewayUsageFiguresOutput):
    kind = serializers.CharField(
        help_text="subscription (a plan) or api_key (the platform key); empty: not served"
    )
    name = serializers.CharField(help_text="the plan's name or the key's; empty: not served")


class GatewayKeyRefOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField(source="key_id")
    name = serializers.CharField(source="key_name")
    prefix = serializers.CharField(source="key_prefix")
    owner = serializers.CharField()


class GatewayKeyUsageOutput(GatewayUsageFiguresOutput):
    key = GatewayKeyRefOutput(source="*")
    models = GatewayModelUsageOutput(many=True)
    served_by = GatewayServedByUsageOutput(many=True)


class GatewayOwnerUsageOutput(GatewayUsageFiguresOutput):
    owner = serializers.CharField(help_text="the username whose keys these are")
    keys = serializers.IntegerField(help_text="how many of their keys were used")
    models = GatewayModelUsageOutput(many=True)
    served_by = GatewayServedByUsageOutput(many=True)


class GatewayUsageOutput(serializers.Serializer[Any]):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    keys = GatewayKeyUsageOutput(many=True, help_text="each key used in the range")
    owners = GatewayOwnerUsageOutput(many=True, help_text="each person, over their keys")
    totals = GatewayUsageFiguresOutput()


def _key_id(raw: str) -> int:
    try:
        pk = int(raw)
    except ValueError:
        pk = 0
    if not 1 <= pk <= MAX_ID:
        raise InvalidInput("Give a key's id (a whole number).", field="key")
    return pk


class GatewayUsageApi(APIView):
    """What keys used over ``[since, until)``: per key, per person and in total, each
    by model and by the credential that served. By default the last 30 days. An
    operator sees their own keys' usage only (another person's key id is a 404)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "since",
                str,
                description="aware ISO 8601 instant; default: "
                f"{USAGE_DEFAULT_DAYS} days before until",
            ),
            OpenApiParameter(
                "until", str, description="aware ISO 8601 instant (excluded); default: now"
            ),
            OpenApiParameter("key", int, description="only this key's usage (its id)"),
            OWNER_FILTER,
        ],
        # ``key=`` names a key the caller cannot see, or none: 404, as for its path.
        responses={200: GatewayUsageOutput, 404: ErrorOutput},
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        until = query_instant(params, "until") or clock.now()
        since = query_instant(params, "since") or until - timedelta(days=USAGE_DEFAULT_DAYS)
        if since >= until:
            raise InvalidInput("Must be before until.", field="since")
        keys = gateway_keys_listed(user=request.user, owner=_owner_param(request))
        if "key" in params:
            pk = gateway_key_get_visible(user=request.user, pk=_key_id(params["key"])).pk
            keys = keys.filter(pk=pk)
        summary = gateway_usage_summary(keys=keys, since=since, until=until)
        return Response(GatewayUsageOutput(summary).data)


# --- open streams and the catalog ---------------------------------------------------


class GatewayStreamOutput(serializers.Serializer[Any]):
    request_id = serializers.CharField()
    key_id = serializers.IntegerField()
    key_name = serializers.CharField(allow_null=True, help_text="null: the key is deleted")
    key_prefix = serializers.CharField(allow_null=True)
    owner = serializers.CharField(allow_null=True, help_text="the key owner's username")
    provider = serializers.CharField()
    model = serializers.CharField()
    started_at = serializers.CharField(help_text="ISO 8601, as the gateway registered it")
    served_by = serializers.CharField(help_text="the plan or key serving it")


def _stream_row(stream: OpenStream, key: GatewayKey | None) -> dict[str, Any]:
    return {
        "request_id": stream.request_id,
        "key_id": stream.key_id,
        "key_name": key.name if key else None,
        "key_prefix": key.prefix if key else None,
        "owner": key.owner.username if key else None,
        "provider": stream.provider,
        "model": stream.model,
        "started_at": stream.started_at,
        "served_by": stream.served_by,
    }


class GatewayStreamsApi(APIView):
    """The gateway's open requests, oldest first: the caller's keys' (an admin: all).
    503 ``streams_unavailable`` when neither Redis nor the gateway can say."""

    @extend_schema(responses={200: GatewayStreamOutput(many=True), 503: ErrorOutput})
    def get(self, request: Request) -> Response:
        try:
            streams = open_streams_list()
        except StreamsUnavailable as exc:
            raise StreamsUnreadable(f"The open streams can't be read now: {exc}.") from exc
        ids = {stream.key_id for stream in streams}
        keys = {key.pk: key for key in gateway_keys_visible_to(request.user).filter(pk__in=ids)}
        everyone = _caller(request).is_staff
        rows = [
            _stream_row(stream, keys.get(stream.key_id))
            # Oldest first whichever source answered (as ``open_streams_read`` orders).
            for stream in sorted(streams, key=lambda s: s.started_at)
            if everyone or stream.key_id in keys
        ]
        return Response(GatewayStreamOutput(rows, many=True).data)


class GatewayProviderOutput(serializers.Serializer[Any]):
    id = serializers.ChoiceField(choices=Provider.choices)
    families = serializers.ListField(child=serializers.CharField())
    models = serializers.ListField(child=serializers.CharField())


class GatewayCatalogOutput(serializers.Serializer[Any]):
    key_prefix = serializers.CharField(help_text="how every gateway key starts")
    providers = GatewayProviderOutput(many=True)


class GatewayCatalogApi(APIView):
    """What a key may be limited to: each provider the gateway serves, its model
    families and the models it lists (the panel's form offers these)."""

    @extend_schema(responses=GatewayCatalogOutput)
    def get(self, request: Request) -> Response:
        providers = [
            {
                "id": provider,
                "families": list(catalog.FAMILIES.get(provider, ())),
                "models": list(catalog.MODELS.get(provider, ())),
            }
            for provider in PROVIDERS
        ]
        return Response(
            GatewayCatalogOutput({"key_prefix": KEY_PREFIX, "providers": providers}).data
        )
