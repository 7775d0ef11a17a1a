"""The audit log: one row per change request, append-only in the database itself."""

from __future__ import annotations

import pgtrigger
from django.conf import settings
from django.db import models

from trinity import clock


class ActorKind(models.TextChoices):
    USER = "user"  # a signed-in person (panel or admin session)
    API_TOKEN = "api_token"  # noqa: S105 - a kind of actor, not a secret
    GATEWAY_KEY = "gateway_key"
    SYSTEM = "system"  # manage.py, beat, the platform itself
    # Nobody signed in: a failed sign-in names the attempted username as text only.
    ANONYMOUS = "anonymous"


class Source(models.TextChoices):
    PANEL = "panel"
    API = "api"
    ADMIN = "admin"
    MANAGE_PY = "manage.py"
    SYSTEM = "system"


class AuditEntry(models.Model):
    """Who changed what, when, from where. Written once, never changed or deleted
    through the app; the database refuses UPDATE and DELETE (``pgtrigger.Protect``),
    and only the retention prune deletes, under ``pgtrigger.ignore``."""

    created_at = models.DateTimeField(default=clock.now, db_index=True)
    actor_kind = models.CharField(max_length=20, choices=ActorKind.choices)
    # No foreign-key constraint and no SET_NULL: deleting a user must not UPDATE rows
    # the database refuses to update; the username is kept as text for that case.
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        blank=True,
        related_name="+",
    )
    actor_username = models.CharField(max_length=150, blank=True, db_index=True)
    # An API token's first 8 characters (as the admin lists it) or a gateway key's id.
    actor_token = models.CharField(max_length=64, blank=True)
    source = models.CharField(max_length=20, choices=Source.choices)
    address = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=100, db_index=True)
    method = models.CharField(max_length=10, blank=True)
    path = models.CharField(max_length=500, blank=True)
    route = models.CharField(max_length=200, blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    object_type = models.CharField(max_length=100, blank=True)
    object_id = models.CharField(max_length=200, blank=True)
    object_label = models.CharField(max_length=200, blank=True)
    # {field: [before, after]}; a secret only by its fingerprint (trinity/audit/rows.py).
    changes = models.JSONField(default=dict, blank=True)
    request_id = models.CharField(max_length=64, blank=True)

    class Meta:
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(fields=["object_type", "object_id"], name="audit_object"),
        ]
        triggers = [
            pgtrigger.Protect(name="append_only", operation=pgtrigger.Update | pgtrigger.Delete),
        ]

    def __str__(self) -> str:
        who = self.actor_username or self.actor_kind
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {who} {self.action}"
