"""``GET /api/agents/{name}/routing``: where the agent's next turn would run, and why.

A thin view over ``execution.explain.explanation.routing_explain`` (the planner on read-only
evidence): the agent's owner or an admin (anyone else gets the same 404 as for an
unknown agent). Read-only: it never probes a provider and writes nothing.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.selectors import agent_get_visible
from execution.explain.explanation import routing_explain
from execution.explain.text import explanation_text
from trinity import clock


class RoutingOutput(serializers.Serializer[Any]):
    """The explanation (``Explanation.as_json``) plus its lines for a terminal."""

    agent = serializers.CharField()
    at = serializers.DateTimeField()
    model = serializers.CharField()
    family = serializers.CharField(allow_null=True)
    routing_policy = serializers.CharField()
    strategy = serializers.CharField()
    autonomous = serializers.BooleanField()
    session_id = serializers.CharField(help_text="the chat session explained ('' for none)")
    breaker = serializers.CharField(help_text="the provider's circuit breaker state")
    assigned = serializers.DictField(allow_null=True)
    pre_dispatch = serializers.CharField()
    first = serializers.DictField(allow_null=True)
    rungs = serializers.ListField(child=serializers.DictField())
    walk_stop = serializers.CharField()
    ends = serializers.CharField(help_text="park or fail: how the turn ends if every rung refuses")
    parks_until = serializers.DateTimeField(
        allow_null=True, help_text="an exhausted autonomous turn parks until then (null: fails)"
    )
    excluded = serializers.ListField(child=serializers.DictField())
    key = serializers.DictField()
    ranking_fallback = serializers.CharField(allow_null=True)
    planned = serializers.CharField(
        allow_null=True,
        help_text="the week plan's line for this agent while its entry is current "
        "(null: no current plan; the turn follows today's rules)",
    )
    summary = serializers.ListField(child=serializers.CharField())


class AgentRoutingApi(APIView):
    permission_classes = [IsAuthenticated]

    class Input(serializers.Serializer[Any]):
        autonomous = serializers.BooleanField(required=False, default=False)
        model = serializers.CharField(required=False, default="", max_length=100)
        session_id = serializers.CharField(required=False, default="", max_length=200)

    @extend_schema(
        parameters=[
            OpenApiParameter("autonomous", bool, description="explain a schedule/agent/mcp turn"),
            OpenApiParameter("session_id", str, description="explain a turn of this chat session"),
        ],
        responses=RoutingOutput,
    )
    def get(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        # A plain dict, not the QueryDict: DRF reads an empty value of a form as none
        # given (``?window=`` would be the default); a query's empty value is a 400.
        data = self.Input(data=request.query_params.dict())
        data.is_valid(raise_exception=True)
        explanation = routing_explain(
            agent=agent,
            now=clock.now(),
            autonomous=data.validated_data["autonomous"],
            model=data.validated_data["model"],
            session_id=data.validated_data["session_id"],
        )
        body = explanation.as_json()
        body["summary"] = explanation_text(explanation)
        return Response(body)
