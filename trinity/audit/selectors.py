"""Reading the audit log: the filters the API and the export share."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError

from trinity.audit.models import AuditEntry
from trinity.pagination import created_in_range

# Query parameter -> the field it must equal.
EXACT_FILTERS = {
    "actor": "actor_username",
    "actor_kind": "actor_kind",
    "source": "source",
    "action": "action",
    "object_type": "object_type",
    "object_id": "object_id",
}


def audit_entries(params: Any) -> QuerySet[AuditEntry]:
    """Entries matching the query string's filters (each exact; ``since``/``until`` a
    time range). Raises ValidationError (a 400 naming it) for a bad instant or a value
    with a NUL character."""
    queryset = AuditEntry.objects.all()
    for param, field in EXACT_FILTERS.items():
        value = params.get(param)
        if value and "\x00" in value:  # no stored text holds one; Postgres refuses it
            raise ValidationError({param: ["Remove the NUL character."]})
        if value:
            queryset = queryset.filter(**{field: value})
    return created_in_range(queryset, params)
