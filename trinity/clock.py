"""The one source of "now" for services; rules take ``now`` as an argument instead."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    """Return the current aware UTC instant (time-machine moves it in tests)."""
    return timezone.now()
