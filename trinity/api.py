"""Cross-cutting API pieces: the one exception handler, the JSON answer to a request
Django refuses before any view runs, the admin permission and the API-token endpoint."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import add_never_cache_headers
from django.views.defaults import bad_request as django_bad_request
from django.views.defaults import page_not_found as django_page_not_found
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.fields import empty
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from trinity import services
from trinity.errors import DomainError
from trinity.schema import ErrorOutput
from trinity_contract.redaction import redact


def _too_large_body() -> dict[str, str]:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return {"detail": f"The request body is larger than {limit} bytes.", "code": "too_large"}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map domain errors to JSON; field errors keep DRF's ``{field: [messages]}`` shape.

    An oversized body (``DATA_UPLOAD_MAX_MEMORY_SIZE``, raised when a view reads
    ``request.data``) is a 413; any other request Django calls suspicious a 400.
    """
    if isinstance(exc, RequestDataTooBig):
        return Response(_too_large_body(), status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, SuspiciousOperation):
        return Response({"detail": "Bad request.", "code": "invalid"}, status=400)
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


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler400``: JSON under ``/api/`` for what Django refuses outside DRF (a plain
    view or a middleware reading an oversized body); Django's own page elsewhere.

    With DEBUG on, Django shows its technical page instead and never calls this.
    """
    if not request.path.startswith("/api/"):
        return django_bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse(_too_large_body(), status=413)
    return JsonResponse({"detail": "Bad request.", "code": "invalid"}, status=400)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: JSON under ``/api/`` for a path no route matches (a name that is
    not a slug, an id that is not a number), in the shape every other 404 has; Django's
    own page elsewhere."""
    if not request.path.startswith("/api/"):
        return django_page_not_found(request, exception)
    return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)


def strict_input_fields() -> None:
    """Make every DRF input field read only what was sent, as the schema says it.

    - A string field (and its slug, regex, URL... kin) refuses a number: DRF coerced
      one into a string (``"model": -4.8e16`` was kept as the model "-4.8e+16").
    - A decimal field refuses a number: the schema says a decimal string (dollars
      "2.50", never a float), and DRF took ``2208`` as "2208.00".
    - A boolean missing from the body stays missing: DRF reads one missing from a form
      body as False (an unticked checkbox), and it parses an empty body as a form even
      though the API parses only JSON, so an empty PUT turned a switch off.

    Done once, here, rather than in every Input serializer (including those written
    later); called from ``TrinityConfig.ready``. Output is unaffected.
    """
    serializers.BooleanField.default_empty_html = empty
    lenient = serializers.CharField.to_internal_value
    if getattr(lenient, "strict", False):
        return

    def strict(self: serializers.CharField, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return lenient(self, data)

    lenient_decimal = serializers.DecimalField.to_internal_value

    def strict_decimal(self: serializers.DecimalField, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid")
        return lenient_decimal(self, data)

    strict.strict = True  # type: ignore[attr-defined]
    serializers.CharField.to_internal_value = strict  # type: ignore[method-assign,assignment]
    serializers.DecimalField.to_internal_value = strict_decimal  # type: ignore[method-assign,assignment]


# What a display name may hold (a subscription's, a notification channel's): letters and
# digits of any script, spaces and ``. @ + - _``. Names are written into log lines,
# notices, walk trails and the panel: a newline would forge a log line, an escape
# sequence colour a terminal, a bidi override reverse what the operator reads, and a
# slash or a quote has no business in a name.
NAME_PATTERN = r"^\w[\w .@+-]*$"
NAME_RULE = "Use letters, digits, spaces and . @ + - _ only, starting with a letter or digit."
# Django's own rule for usernames (UnicodeUsernameValidator).
USERNAME_PATTERN = r"^[\w.@+-]+$"
# The largest id a row can have (a bigint): beyond it no row exists, and Postgres
# refuses to compare with it.
MAX_ID = 2**63 - 1


def name_field(*, max_length: int = 100, required: bool = True) -> serializers.RegexField:
    return serializers.RegexField(
        NAME_PATTERN,
        max_length=max_length,
        required=required,
        error_messages={"invalid": NAME_RULE},
    )


class ApiTokenOutput(serializers.Serializer[Any]):
    username = serializers.CharField()
    token = serializers.CharField(
        help_text="send it as `Authorization: Token <token>`; shown only in this response"
    )
    expires_at = serializers.DateTimeField(
        allow_null=True, help_text="when it stops working; null: until revoked"
    )


class ApiTokenApi(APIView):
    """POST ``{username, rotate?, expires_in_days?}``: a new API token for that user.

    Admins only. The token is in this one response and nowhere else: the database keeps
    its digest, it is never logged, never cached (``Cache-Control: no-store``).
    ``rotate`` revokes the user's other tokens first. ``expires_in_days`` defaults to
    ``TRINITY_API_TOKEN_TTL_DAYS`` (0 there: no expiry).
    """

    permission_classes = [IsAdmin]

    class Input(serializers.Serializer[Any]):
        username = serializers.RegexField(
            USERNAME_PATTERN,
            max_length=150,
            error_messages={"invalid": "Not a username: letters, digits and . @ + - _ only."},
        )
        rotate = serializers.BooleanField(default=False)
        expires_in_days = serializers.IntegerField(
            min_value=1, max_value=3650, required=False, allow_null=True, default=None
        )

    @extend_schema(request=Input, responses={200: ApiTokenOutput, 404: ErrorOutput})
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        days = data.validated_data["expires_in_days"]
        issued = services.api_token_issue(
            username=data.validated_data["username"],
            rotate=data.validated_data["rotate"],
            expires_in=timedelta(days=days) if days is not None else None,
        )
        response = Response(
            ApiTokenOutput(
                {
                    "username": issued.token.user.get_username(),
                    "token": issued.key,
                    "expires_at": issued.token.expiry,
                }
            ).data
        )
        add_never_cache_headers(response)  # no proxy or browser cache keeps the token
        return response
