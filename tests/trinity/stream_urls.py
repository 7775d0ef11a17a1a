"""A URLconf for tests/trinity/test_middleware.py: one event stream, one JSON answer,
both reading the database first the way an API view does."""

from __future__ import annotations

from collections.abc import Iterator

from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import path


def _events() -> Iterator[bytes]:
    yield b"id: 1\nevent: turn\ndata: {}\n\n"


def stream(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    get_user_model().objects.exists()
    return StreamingHttpResponse(_events(), content_type="text/event-stream")


def plain(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"users": get_user_model().objects.exists()})


urlpatterns = [path("stream", stream), path("plain", plain)]
