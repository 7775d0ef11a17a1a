from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from trinity import api, health, panel

# A request Django refuses before DRF sees it (e.g. an oversized body read by a plain
# view) answers JSON under /api/ (trinity/api.py::bad_request).
handler400 = "trinity.api.bad_request"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/", include("subscriptions.urls")),
    path("api/", include("execution.urls")),
    path("api/", include("agents.urls")),
    # The settings panel: session sign-in for the built Vue app, and the app itself.
    path("api/auth/csrf", panel.auth_csrf, name="auth-csrf"),
    path("api/auth/login", panel.auth_login, name="auth-login"),
    path("api/auth/logout", panel.auth_logout, name="auth-logout"),
    path("api/auth/me", panel.auth_me, name="auth-me"),
    # API tokens for scripts and operators (admins only); `manage.py api_token` too.
    path("api/auth/tokens", api.ApiTokenApi.as_view(), name="auth-tokens"),
    # Off the API, for load balancers and orchestrators (trinity/health.py).
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("", panel.index, name="panel"),
]
