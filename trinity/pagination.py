"""How a list that grows is paged: newest first, by an opaque cursor, plus a time range."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination

M = TypeVar("M")

PAGE_SIZE = 50
PAGE_SIZE_MAX = 200


class NewestFirst(CursorPagination):
    """``{next, previous, results}``, newest first; ``next`` is the older page.

    A cursor, not an offset: rows inserted while a client pages land before its
    position, so no row is seen twice or skipped, and no page counts the table. The
    id breaks ties among rows of one instant, so the order is total.
    """

    ordering = ("-created_at", "-id")
    page_size = PAGE_SIZE
    page_size_query_param = "limit"
    max_page_size = PAGE_SIZE_MAX


TIME_RANGE_PARAMETERS = [
    OpenApiParameter(
        "since", datetime, description="only rows created at or after this instant (ISO 8601)"
    ),
    OpenApiParameter(
        "until", datetime, description="only rows created before this instant (ISO 8601)"
    ),
]


def _instant(params: Any, name: str) -> datetime | None:
    raw = params.get(name)
    if not raw:
        return None
    try:
        parsed = parse_datetime(raw)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise ValidationError({name: ["Give an ISO 8601 instant with its offset."]})
    return parsed


def created_in_range(queryset: QuerySet[M], params: Any) -> QuerySet[M]:
    """``queryset`` cut to ``since <= created_at < until`` from the query string.

    Raises ValidationError (a 400 naming the field) for an instant without an offset
    or that does not parse: a naive time would be read in the server's zone.
    """
    since, until = _instant(params, "since"), _instant(params, "until")
    if since is not None:
        queryset = queryset.filter(created_at__gte=since)
    if until is not None:
        queryset = queryset.filter(created_at__lt=until)
    return queryset
