from __future__ import annotations

from django.urls import path

from execution import api
from execution.explain import api as explain_api
from execution.live import api as live_api
from execution.schedules import api as schedules_api

urlpatterns = [
    path("agents/<slug:name>/task", api.AgentTaskApi.as_view(), name="agent-task"),
    path("agents/<slug:name>/chat", api.AgentChatApi.as_view(), name="agent-chat"),
    path(
        "agents/<slug:name>/schedules",
        schedules_api.ScheduleListApi.as_view(),
        name="agent-schedule-list",
    ),
    path(
        "agents/<slug:name>/schedules/<slug:schedule>",
        schedules_api.ScheduleDetailApi.as_view(),
        name="agent-schedule-detail",
    ),
    # Where an agent's next turn would run, and why (before agents.urls: "agents/<slug:name>").
    path("agents/<slug:name>/routing", explain_api.AgentRoutingApi.as_view(), name="agent-routing"),
    path("executions", api.ExecutionListApi.as_view(), name="execution-list"),
    path("executions/<uuid:pk>", api.ExecutionDetailApi.as_view(), name="execution-detail"),
    path(
        "executions/<uuid:pk>/events",
        live_api.ExecutionEventsApi.as_view(),
        name="execution-events",
    ),
    path("executions/<uuid:pk>/cancel", api.ExecutionCancelApi.as_view(), name="execution-cancel"),
    path("notifications", api.NotificationListApi.as_view(), name="notification-list"),
    path(
        "notifications/mark-read",
        api.NotificationMarkReadApi.as_view(),
        name="notification-mark-read",
    ),
    path("reports/usage", api.UsageReportApi.as_view(), name="report-usage"),
]
