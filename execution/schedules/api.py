"""Agent schedules over REST: the agent's owner or an admin (others get 404, as for agents)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import Agent
from agents.selectors import agent_get_visible
from execution.models import Schedule
from execution.schedules import services
from trinity import clock
from trinity.errors import NotFound


class ScheduleOutput(serializers.ModelSerializer[Schedule]):
    agent = serializers.CharField(source="agent.name", read_only=True)

    class Meta:
        model = Schedule
        fields = [
            "id",
            "agent",
            "name",
            "cron",
            "message",
            "model",
            "enabled",
            "next_fire_at",
            "last_fired_at",
            "created_at",
            "updated_at",
        ]


class ScheduleInput(serializers.Serializer[Any]):
    name = serializers.SlugField(max_length=100)
    # Five fields, UTC; the service validates it with croniter.
    cron = serializers.CharField(max_length=100)
    message = serializers.CharField(max_length=200_000)
    model = serializers.CharField(max_length=100, required=False, allow_blank=True)
    enabled = serializers.BooleanField(required=False)


def _schedule_get(agent: Agent, name: str) -> Schedule:
    try:
        return Schedule.objects.select_related("agent").get(agent=agent, name=name)
    except Schedule.DoesNotExist:
        raise NotFound(f"Agent {agent.name!r} has no schedule named {name!r}.") from None


class ScheduleListApi(APIView):
    @extend_schema(responses=ScheduleOutput(many=True))
    def get(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        found = Schedule.objects.filter(agent=agent).select_related("agent")
        return Response(ScheduleOutput(found, many=True).data)

    @extend_schema(request=ScheduleInput, responses={201: ScheduleOutput})
    def post(self, request: Request, name: str) -> Response:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        data = ScheduleInput(data=request.data)
        data.is_valid(raise_exception=True)
        schedule = services.schedule_create(agent=agent, now=clock.now(), **data.validated_data)
        return Response(ScheduleOutput(schedule).data, status=status.HTTP_201_CREATED)


class ScheduleDetailApi(APIView):
    @extend_schema(responses=ScheduleOutput)
    def get(self, request: Request, name: str, schedule: str) -> Response:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        return Response(ScheduleOutput(_schedule_get(agent, schedule)).data)

    @extend_schema(request=ScheduleInput(partial=True), responses=ScheduleOutput)
    def patch(self, request: Request, name: str, schedule: str) -> Response:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        found = _schedule_get(agent, schedule)
        data = ScheduleInput(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        updated = services.schedule_update(
            schedule=found, changes=dict(data.validated_data), now=clock.now()
        )
        return Response(ScheduleOutput(updated).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, name: str, schedule: str) -> Response:
        agent = agent_get_visible(
            user=request.user, name=name, owner=request.query_params.get("owner")
        )
        services.schedule_delete(schedule=_schedule_get(agent, schedule))
        return Response(status=status.HTTP_204_NO_CONTENT)
