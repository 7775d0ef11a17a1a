from __future__ import annotations

from django.urls import path

from subscriptions import api, key_spend_api
from subscriptions.headroom import api as headroom_api
from subscriptions.plan_sign_in import api as sign_in_api
from subscriptions.week_plan import api as week_plan_api

urlpatterns = [
    # The planning task's last plan (subscriptions/week_plan/).
    path("week-plan", week_plan_api.WeekPlanApi.as_view(), name="week-plan"),
    path("subscriptions", api.SubscriptionListApi.as_view(), name="subscription-list"),
    path("subscriptions/<int:pk>", api.SubscriptionDetailApi.as_view(), name="subscription-detail"),
    # A plan signed in from the panel (subscriptions/plan_sign_in/).
    path(
        "subscriptions/sign-in",
        sign_in_api.PlanSignInStartApi.as_view(),
        name="subscription-sign-in",
    ),
    path(
        "subscriptions/sign-in/<slug:flow>/code",
        sign_in_api.PlanSignInCodeApi.as_view(),
        name="subscription-sign-in-code",
    ),
    # ChatGPT's device-code sign-in: no code pasted, the panel polls.
    path(
        "subscriptions/sign-in/device",
        sign_in_api.PlanDeviceSignInStartApi.as_view(),
        name="subscription-sign-in-device",
    ),
    path(
        "subscriptions/sign-in/<slug:flow>/poll",
        sign_in_api.PlanDeviceSignInPollApi.as_view(),
        name="subscription-sign-in-poll",
    ),
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
    path(
        "subscriptions/settings/routing",
        api.RoutingSettingsApi.as_view(),
        name="settings-routing",
    ),
    path("settings/platform-api-key", api.PlatformApiKeyApi.as_view(), name="platform-api-key"),
    path(
        "settings/platform-api-key/retry",
        api.PlatformApiKeyRetryApi.as_view(),
        name="platform-api-key-retry",
    ),
    # The OpenAI key (Codex agents' last rung) beside the Anthropic one.
    path(
        "settings/platform-api-key/openai-codex",
        api.OpenAIPlatformKeyApi.as_view(),
        name="openai-platform-key",
    ),
    path(
        "settings/platform-api-key/openai-codex/retry",
        api.OpenAIPlatformKeyRetryApi.as_view(),
        name="openai-platform-key-retry",
    ),
    path(
        "settings/platform-api-key/openai-codex/budgets",
        api.OpenAIKeyBudgetsApi.as_view(),
        name="openai-platform-key-budgets",
    ),
    path(
        "subscriptions/<int:pk>/retry",
        api.SubscriptionRetryApi.as_view(),
        name="subscription-retry",
    ),
    # Headroom. "agents/subscription-pressure" must stay here: agents.urls, included
    # after this module, has "agents/<slug:name>", which would swallow it.
    path(
        "subscriptions/<int:pk>/usage",
        headroom_api.SubscriptionUsageApi.as_view(),
        name="subscription-usage",
    ),
    path(
        "subscriptions/<int:pk>/usage/refresh",
        headroom_api.SubscriptionUsageRefreshApi.as_view(),
        name="subscription-usage-refresh",
    ),
    path(
        "subscriptions/<int:pk>/headroom/history",
        headroom_api.SubscriptionHeadroomHistoryApi.as_view(),
        name="subscription-headroom-history",
    ),
    path(
        "agents/subscription-pressure",
        headroom_api.SubscriptionPressureApi.as_view(),
        name="subscription-pressure",
    ),
    path("budgets", key_spend_api.KeyBudgetsApi.as_view(), name="key-budgets"),
]
