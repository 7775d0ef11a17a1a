"""How a list that grows is paged: newest first, by an opaque cursor, plus a time range."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

M = TypeVar("M", bound=Model)

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

    def get_page_size(self, request: Request) -> int:
        """``?limit=``: a whole number of at least 1 (more than ``PAGE_SIZE_MAX`` reads
        as the maximum); anything else is a 400 naming it (DRF would quietly answer
        the default page instead, and a client would never learn its limit was wrong)."""
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return PAGE_SIZE
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if size < 1:
            raise ValidationError(
                {"limit": [f"Give a whole number from 1 to {PAGE_SIZE_MAX}."]}
            ) from None
        return min(size, PAGE_SIZE_MAX)

    def decode_cursor(self, request: Request) -> Cursor | None:
        """The request's cursor; a 400 naming ``cursor`` for one this server did not
        issue (DRF answers 404, as if the list were missing)."""
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationError(
                {"cursor": ["Not a cursor this list gave: follow a page's next link."]}
            ) from None


TIME_RANGE_PARAMETERS = [
    OpenApiParameter(
        "since", datetime, description="only rows created at or after this instant (ISO 8601)"
    ),
    OpenApiParameter(
        "until", datetime, description="only rows created before this instant (ISO 8601)"
    ),
]


def query_instant(params: Any, name: str) -> datetime | None:
    """The query string's ``name`` as an aware UTC instant; None when absent.

    Raises ValidationError (a 400 naming it) for a value without an offset or that
    does not parse: a naive time would be read in the server's zone.
    """
    raw = params.get(name)
    if raw is None:  # absent; an empty value is no instant (a 400 below), not absent
        return None
    try:
        parsed = parse_datetime(raw)
        # In UTC: Postgres refuses an offset past ±15:59 that Python parses.
        instant = None if parsed is None or parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        instant = None
    if instant is None:
        raise ValidationError({name: ["Give an ISO 8601 instant with its offset."]})
    return instant


def created_in_range(queryset: QuerySet[M], params: Any) -> QuerySet[M]:
    """``queryset`` cut to ``since <= created_at < until`` from the query string.

    Raises ValidationError (a 400 naming the field) for an instant without an offset
    or that does not parse: a naive time would be read in the server's zone.
    """
    since, until = query_instant(params, "since"), query_instant(params, "until")
    if since is not None:
        queryset = queryset.filter(created_at__gte=since)
    if until is not None:
        queryset = queryset.filter(created_at__lt=until)
    return queryset
