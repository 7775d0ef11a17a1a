"""The project's OpenAPI schema class (``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]``).

Two things drf-spectacular cannot know about this codebase, decided here once rather
than in every view:

- Views parse input with a nested ``Input`` serializer (STYLE.md). drf-spectacular
  names a component after the serializer's class name, so every view's ``Input``
  collapsed into one component. A serializer nested in a view is named after that
  view instead: ``AgentTaskApi.Input`` becomes ``AgentTaskInput``.
- Every error goes through the one exception handler (``trinity.api``), so every
  operation answers the same error shapes; they are added to each operation's
  responses unless the view declares that code itself.
- Every path that addresses an agent by name (``…/agents/{name}…``) takes ``?owner=``
  and may answer 409 ``ambiguous`` (``agents.selectors.agent_get_visible``).
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import AllowAny


class ErrorOutput(serializers.Serializer[Any]):
    """``{detail}`` from DRF (401, 403, 413), ``{detail, code}`` from a domain error."""

    detail = serializers.CharField()
    code = serializers.CharField(
        required=False, help_text="not_found | forbidden | conflict | invalid | too_large"
    )


# A 400 is ``{field: [messages]}``; an error about the request as a whole is
# ``{detail, code}`` (trinity.api.exception_handler). DRF nests the errors of a list's
# items under their index and of a nested object under its fields:
# ``{ids: {"0": [messages]}}``.
FIELD_ERRORS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "{field: [messages]}, or {detail, code} for the request as a whole",
    "additionalProperties": {
        "oneOf": [
            {"type": "array", "items": {"type": "string"}},
            {"type": "string"},
            {"type": "object", "description": "errors by list index or nested field"},
        ]
    },
}


# Names are unique per owner: an admin addressing another owner's agent whose name
# several owners use says whose.
OWNER_PARAMETER = OpenApiParameter(
    "owner",
    str,
    description="the username of the agent's owner: for an admin, to address another "
    "owner's agent whose name several owners use (without it: the admin's own agent of "
    "that name, else the only one, else 409 ambiguous); an operator addresses only "
    "their own agents",
)
_AGENT_BY_NAME = re.compile(r"/agents/\{name\}")


class AutoSchema(SpectacularAutoSchema):
    def get_override_parameters(self) -> list[Any]:
        parameters: list[Any] = list(super().get_override_parameters())
        if _AGENT_BY_NAME.search(self.path):
            parameters.append(OWNER_PARAMETER)
        return parameters

    def get_serializer_name(self, serializer: serializers.Serializer[Any], direction: Any) -> str:
        """A serializer nested in a view is named after the view (``AgentTaskInput``)."""
        owner, _, name = type(serializer).__qualname__.rpartition(".")
        if owner and "<" not in owner:  # not a class defined inside a function
            return owner.removesuffix("Api") + name
        return super().get_serializer_name(serializer, direction)

    # drf-spectacular has no public hook for responses common to every operation; this
    # private one is stable across 0.2x, and tests/trinity/test_openapi_schema.py pins
    # the error shapes it adds, so an upgrade that moves it fails there.
    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for code, body in self._error_responses().items():
            if code not in responses:
                responses[code] = self._get_response_for_code(body, code, direction=direction)
        return responses

    def _error_responses(self) -> dict[str, Any]:
        errors: dict[str, Any] = {}
        has_body = (
            self.method in ("POST", "PUT", "PATCH") and self.get_request_serializer() is not None
        )
        # A view's own parameters can be refused (400); ``?owner=`` never is (it only
        # picks an agent, or finds none: 404).
        if has_body or [p for p in self.get_override_parameters() if p is not OWNER_PARAMETER]:
            errors["400"] = FIELD_ERRORS_SCHEMA
        public = all(isinstance(p, AllowAny) for p in self.view.get_permissions())
        if not public:
            # Unauthenticated; signed in but not allowed (admin only), or a session
            # request without its CSRF token.
            errors["401"] = ErrorOutput
            errors["403"] = ErrorOutput
        if "{" in self.path:
            errors["404"] = ErrorOutput
        if _AGENT_BY_NAME.search(self.path):
            errors["409"] = ErrorOutput  # ambiguous: several owners' agents, none yours
        if has_body:
            errors["413"] = ErrorOutput
        return errors


# A write that lost a race or collides with what exists: the field it is about, or
# ``{detail, code: "conflict"}``. Views that can answer it declare it.
CONFLICT = OpenApiResponse(FIELD_ERRORS_SCHEMA, description="conflicts with the current state")


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """``Authorization: Token <key>`` (trinity.authentication.ThrottledTokenAuthentication,
    knox's digest tokens): the scheme DRF's own token authentication was documented as."""

    target_class = "trinity.authentication.ThrottledTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'Token-based authentication with required prefix "Token"',
        }
