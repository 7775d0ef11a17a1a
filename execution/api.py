"""Turns over REST: run one, list them, read one."""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404, HttpResponseBase
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.generics import ListAPIView
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import Agent
from agents.selectors import agent_get_visible, agents_named
from execution import services
from execution.live.api import TURN_STREAM, StreamingApiView, streamed_turn
from execution.live.cancel import execution_cancel
from execution.models import AUTONOMOUS_TRIGGERS, Execution, Status, Trigger
from execution.selectors import (
    REPORT_GROUPS,
    REPORT_METRICS,
    execution_get_visible,
    executions_visible_to,
    usage_report,
    usage_totals,
)
from routing.walk import Stop
from trinity import clock
from trinity.api import MAX_ID
from trinity.errors import InvalidInput
from trinity.models import Notification
from trinity.notification_inbox import notifications_mark_read, notifications_with_read_state
from trinity.pagination import TIME_RANGE_PARAMETERS, NewestFirst, created_in_range
from trinity.schema import CONFLICT, OWNER_PARAMETER

# A failed turn answers with the status its error_code means to an HTTP client.
ERROR_HTTP_STATUS = {
    "billing": 429,
    "auth": 503,
    # A well-formed request the model cannot serve: 422, so it never reads as a
    # malformed body (those are 400 with the field errors).
    "model_unsupported": 422,
    "timeout": 504,
    "container_fault": 503,
    "runtime_killed": 500,
    "upstream_error": 502,
    "worker_lost": 503,
    # Its owner or an admin stopped it.
    "cancelled": 409,
}
RETRYABLE_STOPS = frozenset({Stop.BUDGET, Stop.PROVIDER_OUTAGE, Stop.AT_CAPACITY})


class FieldsBuiltOnce:
    """A ModelSerializer mixin: build the fields from the model once per class.

    DRF re-inspects the model for every instance (about half of rendering a turn's
    answer); this keeps each field's class and arguments from the first build and makes
    fresh instances from them (each serializer binds fields of its own), skipping both
    the inspection and the deep copy DRF's field cloning would do.
    """

    _field_recipes: ClassVar[dict[type, dict[str, tuple[type, tuple[Any, ...], dict[str, Any]]]]]
    _field_recipes = {}

    def get_fields(self) -> dict[str, Any]:
        recipe = FieldsBuiltOnce._field_recipes.get(type(self))
        if recipe is None:
            built: dict[str, Any] = super().get_fields()  # type: ignore[misc]
            FieldsBuiltOnce._field_recipes[type(self)] = {
                name: (type(field), field._args, field._kwargs) for name, field in built.items()
            }
            return built
        return {name: cls(*args, **kwargs) for name, (cls, args, kwargs) in recipe.items()}


class ExecutionOutput(FieldsBuiltOnce, serializers.ModelSerializer[Execution]):
    # Names are unique per owner only: an admin's list holds every owner's "bot". Read
    # from the agent loaded with the turn (agent_get_visible joins its owner; the list
    # joins it too), so neither a turn's answer nor a page queries for it.
    agent_owner = serializers.CharField(
        source="agent.owner.username",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="the username of the agent's owner; null once the agent is deleted",
    )
    served_by_subscription = serializers.SerializerMethodField()
    earliest_reset = serializers.DateTimeField(source="resets_at", read_only=True, allow_null=True)
    retryable = serializers.SerializerMethodField()

    class Meta:
        model = Execution
        fields = [
            "id",
            "agent_name",
            "agent_owner",
            "trigger",
            "status",
            "error_code",
            "error_detail",
            "retryable",
            "walk_stop",
            "resets_at",
            "earliest_reset",
            "response",
            "model",
            "session_id",
            "served_by_kind",
            "served_by_subscription",
            "subscription_switch",
            "attempts",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "created_at",
            "deadline",
            "finished_at",
            "parked_until",
            "cancel_requested_at",
        ]

    def get_served_by_subscription(self, obj: Execution) -> dict[str, Any] | None:
        sub = obj.served_by_subscription
        return None if sub is None else {"id": sub.pk, "name": sub.name}

    def get_retryable(self, obj: Execution) -> bool:
        """A fresh send gets a fresh budget: worth it only when the budget ran out, or
        when the turn was not sent for a passing reason (a provider outage the breaker
        stopped it for, every usable plan serving its concurrency cap)."""
        return obj.walk_stop in RETRYABLE_STOPS


def turn_response(execution: Execution) -> Response:
    """The Execution, with the HTTP status its outcome means."""
    if execution.status in (Status.SUCCEEDED, Status.QUEUED, Status.RUNNING):
        status = 200
    elif execution.walk_stop in (Stop.BUDGET, Stop.PROVIDER_OUTAGE):
        status = 503
    else:
        status = ERROR_HTTP_STATUS.get(execution.error_code, 502)
    return Response(ExecutionOutput(execution).data, status=status)


# Every status a turn that ran and failed answers, with its execution (error_code says
# why).
TURN_FAILED = {
    code: OpenApiResponse(ExecutionOutput, description="the turn ran and failed: see error_code")
    for code in sorted({*ERROR_HTTP_STATUS.values(), 503})
}


def _stream_field() -> serializers.BooleanField:
    return serializers.BooleanField(
        default=False,
        help_text="answer the turn's events as Server-Sent Events while it runs "
        "(text/event-stream, the same stream as GET /api/executions/{id}/events)",
    )


def _timeout_field() -> serializers.IntegerField:
    return serializers.IntegerField(
        min_value=5, max_value=settings.TRINITY_TURN_TIMEOUT_MAX_SECONDS, required=False
    )


class AgentTaskApi(StreamingApiView):
    """Run one turn on an agent (its owner or an admin).

    Sync by default: the answer comes back in this response, after the walk if the
    agent's credential refused. With ``async: true`` it answers 202
    ``{execution_id}`` at once and a worker runs the turn; async turns may carry an
    autonomous trigger (``schedule``, ``agent``, ``mcp``).
    """

    class Input(serializers.Serializer[Any]):
        message = serializers.CharField(max_length=200_000)
        model = serializers.CharField(max_length=100, required=False)
        timeout_seconds = _timeout_field()
        async_ = serializers.BooleanField(default=False, source="run_async", label="async")
        trigger = serializers.ChoiceField(
            choices=[Trigger.API, *AUTONOMOUS_TRIGGERS], default=Trigger.API
        )
        stream = _stream_field()

        def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
            fields = super().get_fields()
            fields["async"] = fields.pop("async_")  # a keyword in Python, a field on the wire
            return fields

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if attrs["trigger"] != Trigger.API and not attrs["run_async"]:
                raise serializers.ValidationError(
                    {"trigger": ["An autonomous trigger needs async: true."]}
                )
            if attrs["stream"] and attrs["run_async"]:
                raise serializers.ValidationError(
                    {
                        "stream": [
                            "Choose stream or async: an async turn's stream is "
                            "GET /api/executions/{id}/events."
                        ]
                    }
                )
            return attrs

    class Accepted(serializers.Serializer[Any]):
        execution_id = serializers.UUIDField()
        status = serializers.CharField()

    @extend_schema(
        request=Input,
        responses={200: ExecutionOutput, 202: Accepted, **TURN_STREAM, **TURN_FAILED},
    )
    def post(self, request: Request, name: str) -> HttpResponseBase:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        if values.pop("stream"):
            values.pop("run_async")
            return streamed_turn(request, agent, values)
        if values.pop("run_async"):
            execution = services.execution_enqueue(agent=agent, **values)
            return Response(
                {"execution_id": str(execution.pk), "status": execution.status}, status=202
            )
        return turn_response(services.execution_run(agent=agent, **values))


class AgentChatApi(StreamingApiView):
    """Continue (or start) a Claude Code chat session on an agent; sync.

    The answer carries the ``session_id`` to send with the next message; the session
    resumes on whichever credential serves that turn.
    """

    class Input(serializers.Serializer[Any]):
        message = serializers.CharField(max_length=200_000)
        session_id = serializers.RegexField(r"^[A-Za-z0-9._:-]{1,200}$", required=False)
        model = serializers.CharField(max_length=100, required=False)
        timeout_seconds = _timeout_field()
        stream = _stream_field()

    @extend_schema(request=Input, responses={200: ExecutionOutput, **TURN_STREAM, **TURN_FAILED})
    def post(self, request: Request, name: str) -> HttpResponseBase:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        session_id = values.pop("session_id", None) or str(uuid.uuid4())
        if values.pop("stream"):
            return streamed_turn(
                request, agent, {**values, "trigger": Trigger.CHAT, "session_id": session_id}
            )
        return turn_response(
            services.execution_run(
                agent=agent, trigger=Trigger.CHAT, session_id=session_id, **values
            )
        )


def _agents_filtered(request: Request) -> QuerySet[Agent]:
    """The agents a list's ``?agent=<name>`` (and ``?owner=``) means for the caller."""
    return agents_named(
        user=request.user,
        name=request.query_params["agent"],
        owner=request.query_params.get("owner"),
    )


class ExecutionListApi(ListAPIView[Execution]):
    """Turns, newest first, a page at a time (``next`` is the older page)."""

    serializer_class = ExecutionOutput
    pagination_class = NewestFirst

    @extend_schema(
        parameters=[
            OpenApiParameter("agent", str),
            OWNER_PARAMETER,
            OpenApiParameter("status", str, enum=Status.values),
            OpenApiParameter("error_code", str),
            *TIME_RANGE_PARAMETERS,
        ],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Execution]:
        # Each row names its agent's owner: one join, not a query per row.
        queryset = executions_visible_to(self.request.user).select_related("agent__owner")
        params = self.request.query_params
        if "status" in params and params["status"] not in Status.values:
            raise ValidationError({"status": [f"Choose one of: {', '.join(Status.values)}."]})
        for field in ("status", "error_code"):
            if params.get(field):
                queryset = queryset.filter(**{field: params[field]})
        if params.get("agent"):
            # The agent that name means for the caller (an admin's own first, or
            # ?owner=): never another operator's namesake.
            queryset = queryset.filter(agent__in=_agents_filtered(self.request))
        return created_in_range(queryset, params)


class ExecutionDetailApi(APIView):
    @extend_schema(responses=ExecutionOutput)
    def get(self, request: Request, pk: str) -> Response:
        return Response(ExecutionOutput(execution_get_visible(user=request.user, pk=pk)).data)


class ExecutionCancelApi(APIView):
    """Cancel a turn (its agent's owner or an admin): a queued or parked one before it
    runs; a running one has its CLI, and everything the CLI started, killed, and ends
    ``cancelled`` (its stream's ``end`` says when), with nothing committed and no
    refusal recorded. 409 ``finished`` when it already ended."""

    @extend_schema(request=None, responses={200: ExecutionOutput, 409: CONFLICT})
    def post(self, request: Request, pk: str) -> Response:
        execution = execution_get_visible(user=request.user, pk=pk)
        return Response(
            ExecutionOutput(execution_cancel(execution=execution, now=clock.now())).data
        )


class NotificationOutput(FieldsBuiltOnce, serializers.ModelSerializer[Notification]):
    read_at = serializers.DateTimeField(
        allow_null=True,
        read_only=True,
        help_text="when you marked it read; null while it is unread for you (each user "
        "has their own read state)",
    )

    agent_owner = serializers.CharField(
        source="agent.owner.username",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="the username of the owner of the agent it is about (names are unique "
        "per owner only); null when it is about no agent, or the agent is deleted",
    )

    class Meta:
        model = Notification
        fields = [
            "id",
            "kind",
            "level",
            "title",
            "body",
            "agent_name",
            "agent_owner",
            "subscription_id",
            "data",
            "created_at",
            "read_at",
        ]


class NotificationListApi(ListAPIView[Notification]):
    """What the operator has been told, newest first, a page at a time (filters: kind,
    level, agent, unread, and a time range)."""

    serializer_class = NotificationOutput
    pagination_class = NewestFirst

    @extend_schema(
        parameters=[
            OpenApiParameter("kind", str),
            OpenApiParameter("level", str, enum=Notification.Level.values),
            OpenApiParameter("agent", str),
            OWNER_PARAMETER,
            OpenApiParameter("unread", bool),
            *TIME_RANGE_PARAMETERS,
        ],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Notification]:
        params = self.request.query_params
        if "level" in params and params["level"] not in Notification.Level.values:
            raise ValidationError(
                {"level": [f"Choose one of: {', '.join(Notification.Level.values)}."]}
            )
        # Absent means no filter; present (even empty) must say which.
        unread = params["unread"].lower() if "unread" in params else ""
        if "unread" in params and unread not in ("true", "false", "1", "0"):
            raise ValidationError({"unread": ["Use true or false."]})
        # Read state is the caller's own (``NotificationRead``).
        queryset = notifications_with_read_state(
            self.request.user,
            read={"true": False, "1": False, "false": True, "0": True}.get(unread),
        )
        queryset = queryset.select_related("agent__owner")  # agent_owner: one join
        if params.get("kind"):
            queryset = queryset.filter(kind=params["kind"])
        if params.get("level"):
            queryset = queryset.filter(level=params["level"])
        if params.get("agent"):
            # The agent of that name now, as the caller addresses it: a deleted
            # namesake's notices are not its, nor another owner's namesake's.
            queryset = queryset.filter(agent__in=_agents_filtered(self.request))
        return created_in_range(queryset, params)


class NotificationMarkReadApi(APIView):
    """Mark notifications read for the caller: the given ids, or every one the caller can
    see and has not read. Nobody else's read state changes."""

    class Input(serializers.Serializer[Any]):
        ids = serializers.ListField(
            child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
            required=False,
            max_length=1000,
        )
        all = serializers.BooleanField(default=False)

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if not attrs.get("ids") and not attrs["all"]:
                raise serializers.ValidationError({"ids": ["Give ids, or all: true."]})
            return attrs

    class Output(serializers.Serializer[Any]):
        marked = serializers.IntegerField()

    @extend_schema(request=Input, responses=Output)
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        marked = notifications_mark_read(
            user=request.user,
            ids=None if data.validated_data["all"] else data.validated_data["ids"],
            now=clock.now(),
        )
        return Response({"marked": marked})


# --- usage reports ------------------------------------------------------------------

REPORT_MAX_DAYS = 400
REPORT_DEFAULT_DAYS = 30


class UsageCsvRenderer(BaseRenderer):
    """``Accept: text/csv`` (or ``?format=csv``): the report's rows, one line each,
    under a header naming the group and the metrics."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        # Grouped by agent, the owner tells two owners' agents of one name apart.
        owner = ["owner"] if data["group"] == "agent" else []
        writer.writerow([data["group"], *owner, *REPORT_METRICS])
        for row in data["rows"]:
            whose = [row.get("owner") or ""] if owner else []
            writer.writerow([row["group"], *whose, *(row[m] for m in REPORT_METRICS)])
        return out.getvalue().encode(self.charset)


def _report_instant(raw: str, *, field: str, end: bool) -> datetime:
    """A date (a whole UTC day: ``to`` includes it) or an aware ISO datetime."""
    try:
        # Django's parsers answer None for a malformed value, ValueError for an
        # impossible one (month 13); both are the caller's mistake.
        day = parse_date(raw) if len(raw) == 10 else None
        instant = None if day is not None else parse_datetime(raw)
    except ValueError:
        day = instant = None
    if day is not None:
        if end:
            day += timedelta(days=1)
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    if instant is None:
        raise InvalidInput(
            "Use a date (2026-11-30) or an ISO datetime with its offset.", field=field
        )
    if instant.tzinfo is None:
        raise InvalidInput("Give the datetime's offset, e.g. 2026-11-30T12:00:00Z.", field=field)
    return instant


class UsageRowOutput(serializers.Serializer[Any]):
    group = serializers.CharField(help_text="the day (UTC), subscription, agent or credential kind")
    owner = serializers.CharField(
        allow_null=True,
        default=None,
        help_text="group=agent: the agent's owner (a row is one agent, and names are "
        "unique per owner only); null for a deleted agent's history and in other groups",
    )
    turns = serializers.IntegerField()
    succeeded = serializers.IntegerField()
    failed = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    key_spend_usd = serializers.DecimalField(
        max_digits=14,
        decimal_places=6,
        coerce_to_string=False,
        help_text="what turns served by the platform API key cost",
    )
    refusals = serializers.IntegerField(help_text="rate-limit and credential refusals recorded")
    switches = serializers.IntegerField(help_text="committed subscription switches")


class UsageTotalsOutput(UsageRowOutput):
    group = None  # type: ignore[assignment]
    owner = None  # type: ignore[assignment]


class UsageReportOutput(serializers.Serializer[Any]):
    # "from" is a keyword: the fields are renamed on the wire in get_fields.
    from_ = serializers.DateTimeField(source="start")
    to = serializers.DateTimeField(source="end")
    group = serializers.ChoiceField(choices=REPORT_GROUPS)
    rows = UsageRowOutput(many=True)
    totals = UsageTotalsOutput()

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields


class UsageReportApi(APIView):
    """Turns, tokens, platform-key spend, refusals and switches over ``[from, to)``,
    grouped by ``day`` (UTC), ``subscription``, ``agent`` or ``credential`` kind.

    ``from``/``to`` are dates (``to`` includes its day) or aware ISO datetimes; by
    default the last 30 days, at most 400. Owners count their agents' turns, admins
    every turn. Grouped by agent, a row is one agent with its ``owner`` (an admin's
    report keeps two owners' "bot" apart). JSON, or CSV with ``Accept: text/csv``
    (``?format=csv`` for a link). A bad parameter is a 400 naming it, always in JSON.
    """

    renderer_classes = [JSONRenderer, UsageCsvRenderer]

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # DRF reads an empty ?format= as none given; the schema names json and csv only.
        if request.query_params.get("format", "json") not in ("json", "csv"):
            raise InvalidInput("Choose json or csv.", field="format")
        try:
            return super().perform_content_negotiation(request, force=force)
        except Http404:  # DRF's answer to an unknown ?format=, which no schema names
            raise InvalidInput("Choose json or csv.", field="format") from None

    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, description="date or aware ISO datetime"),
            OpenApiParameter("to", str, description="date (included) or aware ISO datetime"),
            OpenApiParameter("group", str, enum=list(REPORT_GROUPS), default="day"),
        ],
        responses={(200, "application/json"): UsageReportOutput, (200, "text/csv"): str},
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        group = params.get("group", "day")
        if group not in REPORT_GROUPS:
            raise InvalidInput(f"Choose one of: {', '.join(REPORT_GROUPS)}.", field="group")
        now = clock.now()
        end = _report_instant(params["to"], field="to", end=True) if params.get("to") else now
        start = (
            _report_instant(params["from"], field="from", end=False)
            if params.get("from")
            else end - timedelta(days=REPORT_DEFAULT_DAYS)
        )
        if start >= end:
            raise InvalidInput("Must be before to.", field="from")
        if end - start > timedelta(days=REPORT_MAX_DAYS):
            raise InvalidInput(f"A report covers at most {REPORT_MAX_DAYS} days.", field="from")
        rows = usage_report(user=request.user, start=start, end=end, group=group)
        report = {
            "start": start,
            "end": end,
            "group": group,
            "rows": rows,
            "totals": usage_totals(rows),
        }
        response = Response(UsageReportOutput(report).data)
        if getattr(request.accepted_renderer, "format", None) == "csv":
            name = f"trinity-usage-{group}-{start:%Y%m%d}-{end:%Y%m%d}.csv"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        # An error is JSON whatever was asked for: a CSV body has no place for it.
        if response.status_code >= 400:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
