from __future__ import annotations

from trinity.models import SystemSettings


def system_settings_get() -> SystemSettings:
    """Return the settings row, creating it with the defaults on first read."""
    row, _ = SystemSettings.objects.get_or_create(pk=SystemSettings.SINGLETON_ID)
    return row
