"""``GET /api/audit`` (cursor-paged) and ``GET /api/audit/export`` (JSON lines):
admins only, and no method that writes (405): the log is append-only for everyone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trinity.api import IsAdmin
from trinity.audit.models import AuditEntry
from trinity.audit.selectors import EXACT_FILTERS, audit_entries
from trinity.pagination import TIME_RANGE_PARAMETERS, NewestFirst

EXPORT_CHUNK = 500
NDJSON = "application/x-ndjson"

FILTER_PARAMETERS = [
    OpenApiParameter(name, str, description=f"only entries whose {field} is this")
    for name, field in EXACT_FILTERS.items()
] + TIME_RANGE_PARAMETERS


class AuditEntryOutput(serializers.ModelSerializer[AuditEntry]):
    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "created_at",
            "actor_kind",
            "actor_user",
            "actor_username",
            "actor_token",
            "source",
            "address",
            "action",
            "method",
            "path",
            "route",
            "status_code",
            "object_type",
            "object_id",
            "object_label",
            "changes",
            "request_id",
        ]
        read_only_fields = fields


class AuditListApi(ListAPIView[AuditEntry]):
    """Every recorded change, newest first, by cursor (``?cursor=``, ``?limit=``)."""

    permission_classes = [IsAdmin]
    serializer_class = AuditEntryOutput
    pagination_class = NewestFirst

    @extend_schema(parameters=FILTER_PARAMETERS)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[AuditEntry]:
        return audit_entries(self.request.query_params)


def _lines(rows: Any) -> Iterator[bytes]:
    for row in rows.iterator(chunk_size=EXPORT_CHUNK):
        yield (json.dumps(AuditEntryOutput(row).data, cls=DjangoJSONEncoder) + "\n").encode()


class AuditExportApi(APIView):
    """The filtered entries, oldest first, one JSON object per line (``.jsonl``)."""

    permission_classes = [IsAdmin]

    @extend_schema(
        parameters=FILTER_PARAMETERS,
        responses={(200, NDJSON): OpenApiResponse(OpenApiTypes.STR, description="JSON lines")},
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        rows = audit_entries(request.query_params).order_by("created_at", "id")
        response = StreamingHttpResponse(_lines(rows), content_type=NDJSON)
        response["Content-Disposition"] = 'attachment; filename="audit.jsonl"'
        response["Cache-Control"] = "no-store"
        return response
