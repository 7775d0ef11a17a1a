"""Cross-cutting API pieces: the one exception handler and the admin permission."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from trinity.errors import DomainError
from trinity.redaction import redact


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map domain errors to JSON; field errors keep DRF's ``{field: [messages]}`` shape."""
    if isinstance(exc, DomainError):
        message = redact(exc.message)
        body: dict[str, Any] = (
            {exc.field: [message]} if exc.field else {"detail": message, "code": exc.code}
        )
        response = Response(body, status=exc.status_code)
        if exc.retry_after is not None:
            response["Retry-After"] = str(exc.retry_after)
        return response
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            return Response(
                {
                    field: [redact(m) for m in messages]
                    for field, messages in exc.message_dict.items()
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        return Response({"detail": [redact(m) for m in exc.messages]}, status=400)
    return drf_exception_handler(exc, context)


class IsAdmin(BasePermission):
    """Admins are staff users. Checked before any input is parsed or written."""

    message = "Only an admin can do this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.is_staff)


class AdminForWrites(BasePermission):
    """Anyone signed in may read; only admins may change."""

    message = "Only an admin can change this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return bool(user.is_staff)
