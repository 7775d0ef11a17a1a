from __future__ import annotations

from django.urls import path

from agents import api

urlpatterns = [
    path("agents", api.AgentListApi.as_view(), name="agent-list"),
    path("agents/<slug:name>", api.AgentDetailApi.as_view(), name="agent-detail"),
    path("agents/<slug:name>/start", api.AgentStartApi.as_view(), name="agent-start"),
    path("agents/<slug:name>/stop", api.AgentStopApi.as_view(), name="agent-stop"),
    path("agents/<slug:name>/health", api.AgentHealthApi.as_view(), name="agent-health"),
]
