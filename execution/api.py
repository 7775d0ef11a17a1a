"""Turns over REST: run one, list them, read one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.selectors import agent_get_visible
from execution import services
from execution.models import Execution, Status, Trigger
from execution.selectors import (
    execution_get_visible,
    executions_visible_to,
    notifications_visible_to,
)
from trinity.models import Notification

# A failed turn answers with the status its error_code means to an HTTP client.
ERROR_HTTP_STATUS = {
    "rate_limit": 429,
    "auth": 503,
    "model_unsupported": 400,
    "timeout": 504,
    "container_fault": 503,
    "runtime_killed": 500,
}
LIST_LIMIT = 200


class ExecutionOutput(serializers.ModelSerializer[Execution]):
    served_by_subscription = serializers.SerializerMethodField()

    class Meta:
        model = Execution
        fields = [
            "id",
            "agent_name",
            "trigger",
            "status",
            "error_code",
            "error_detail",
            "resets_at",
            "response",
            "model",
            "served_by_kind",
            "served_by_subscription",
            "attempts",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "created_at",
            "finished_at",
        ]

    def get_served_by_subscription(self, obj: Execution) -> dict[str, Any] | None:
        sub = obj.served_by_subscription
        return None if sub is None else {"id": sub.pk, "name": sub.name}


class AgentTaskApi(APIView):
    """Run one turn on an agent (its owner or an admin) and wait for the answer."""

    class Input(serializers.Serializer[Any]):
        message = serializers.CharField(max_length=200_000)
        model = serializers.CharField(max_length=100, required=False)
        timeout_seconds = serializers.IntegerField(min_value=5, max_value=86_400, required=False)

    @extend_schema(request=Input, responses=ExecutionOutput)
    def post(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(user=request.user, name=name)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        execution = services.execution_run(agent=agent, trigger=Trigger.API, **data.validated_data)
        status = (
            200
            if execution.status == Status.SUCCEEDED
            else ERROR_HTTP_STATUS.get(execution.error_code, 502)
        )
        return Response(ExecutionOutput(execution).data, status=status)


class ExecutionListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("agent", str),
            OpenApiParameter("status", str, enum=Status.values),
            OpenApiParameter("error_code", str),
        ],
        responses=ExecutionOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        queryset = executions_visible_to(request.user)
        params = request.query_params
        if params.get("status") and params["status"] not in Status.values:
            return Response({"status": [f"Choose one of: {', '.join(Status.values)}."]}, status=400)
        for field in ("agent", "status", "error_code"):
            if params.get(field):
                queryset = queryset.filter(
                    **{"agent_name" if field == "agent" else field: params[field]}
                )
        return Response(ExecutionOutput(queryset[:LIST_LIMIT], many=True).data)


class ExecutionDetailApi(APIView):
    @extend_schema(responses=ExecutionOutput)
    def get(self, request: Request, pk: str) -> Response:
        return Response(ExecutionOutput(execution_get_visible(user=request.user, pk=pk)).data)


class NotificationOutput(serializers.ModelSerializer[Notification]):
    class Meta:
        model = Notification
        fields = [
            "id",
            "kind",
            "level",
            "title",
            "body",
            "agent_name",
            "subscription_id",
            "data",
            "created_at",
        ]


class NotificationListApi(APIView):
    """What the operator has been told, newest first (filters: kind, level, agent)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("kind", str),
            OpenApiParameter("level", str, enum=Notification.Level.values),
            OpenApiParameter("agent", str),
        ],
        responses=NotificationOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        queryset = notifications_visible_to(request.user)
        params = request.query_params
        if params.get("level") and params["level"] not in Notification.Level.values:
            return Response(
                {"level": [f"Choose one of: {', '.join(Notification.Level.values)}."]}, status=400
            )
        if params.get("kind"):
            queryset = queryset.filter(kind=params["kind"])
        if params.get("level"):
            queryset = queryset.filter(level=params["level"])
        if params.get("agent"):
            queryset = queryset.filter(agent_name=params["agent"])
        return Response(NotificationOutput(queryset[:LIST_LIMIT], many=True).data)
