from __future__ import annotations

from django.urls import path

from subscriptions import api

urlpatterns = [
    path("subscriptions", api.SubscriptionListApi.as_view(), name="subscription-list"),
    path("subscriptions/<int:pk>", api.SubscriptionDetailApi.as_view(), name="subscription-detail"),
    path(
        "subscriptions/agents/<slug:name>",
        api.AgentAssignmentApi.as_view(),
        name="subscription-assignment",
    ),
    path(
        "subscriptions/settings/auto-switch",
        api.AutoSwitchApi.as_view(),
        name="settings-auto-switch",
    ),
    path(
        "subscriptions/settings/api-key-fallback",
        api.ApiKeyFallbackApi.as_view(),
        name="settings-api-key-fallback",
    ),
    path(
        "subscriptions/settings/headroom-auto-refresh",
        api.HeadroomAutoRefreshApi.as_view(),
        name="settings-headroom-auto-refresh",
    ),
    path(
        "subscriptions/settings/headroom-alert-threshold",
        api.HeadroomAlertThresholdApi.as_view(),
        name="settings-headroom-alert-threshold",
    ),
    path("settings/platform-api-key", api.PlatformApiKeyApi.as_view(), name="platform-api-key"),
]
