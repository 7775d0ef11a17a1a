"""A URLconf with one write route nobody registered with the audit log."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def poke(request: HttpRequest, thing: str) -> HttpResponse:
    return HttpResponse(status=204)


urlpatterns = [path("poke/<slug:thing>", poke, name="poke")]
