from __future__ import annotations

from django.urls import path

from execution import api

urlpatterns = [
    path("agents/<slug:name>/task", api.AgentTaskApi.as_view(), name="agent-task"),
    path("agents/<slug:name>/chat", api.AgentChatApi.as_view(), name="agent-chat"),
    path("executions", api.ExecutionListApi.as_view(), name="execution-list"),
    path("executions/<uuid:pk>", api.ExecutionDetailApi.as_view(), name="execution-detail"),
    path("notifications", api.NotificationListApi.as_view(), name="notification-list"),
    path(
        "notifications/mark-read",
        api.NotificationMarkReadApi.as_view(),
        name="notification-mark-read",
    ),
    path("reports/usage", api.UsageReportApi.as_view(), name="report-usage"),
]
