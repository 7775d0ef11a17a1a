"""Agent schedules: cron expressions that fire autonomous turns.

``cron`` holds the pure rules (when a schedule fires next), ``services`` the writes
and beat's sweep, ``api`` the REST views.
"""

from __future__ import annotations
