from __future__ import annotations

import json
import os
import secrets

from django.contrib.auth import views as auth_views
from django.contrib.auth.models import Group, User
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST


@csrf_exempt
@require_POST
def control_user(request: HttpRequest) -> HttpResponse:
    """The test's hand on the provider: create or change a user and set its groups
    (``{username, password, email, groups, rename_to}``), behind the run's token."""
    expected = f"Bearer {os.environ['IDP_CONTROL_TOKEN']}"
    if not secrets.compare_digest(request.headers.get("Authorization", ""), expected):
        return HttpResponse(status=403)
    body = json.loads(request.body)
    user, _ = User.objects.get_or_create(username=body["username"])
    user.username = body.get("rename_to") or user.username
    user.email = body.get("email", user.email)
    if "password" in body:
        user.set_password(body["password"])
    user.save()
    if "groups" in body:
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in body["groups"]])
    return JsonResponse({"sub": str(user.pk)})


urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("control/user", control_user),
]
