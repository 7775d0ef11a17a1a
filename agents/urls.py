from __future__ import annotations

from django.urls import path

from agents import api

urlpatterns = [
    path("agents", api.AgentListApi.as_view(), name="agent-list"),
    path("agents/<slug:name>", api.AgentDetailApi.as_view(), name="agent-detail"),
]
