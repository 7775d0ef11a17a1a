from __future__ import annotations

from django.urls import path

from trinity.sso import views

# Register <this site>/oidc/callback/ as the redirect URI at the provider.
urlpatterns = [
    path("authenticate/", views.SsoStart.as_view(), name="sso-start"),
    path("callback/", views.SsoCallback.as_view(), name="sso-callback"),
]
