"""The Celery app. The beat schedule is code; each entry expires after about one period."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trinity.settings")

app = Celery("trinity")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

HOUR = 3600

app.conf.beat_schedule = {
    # Hourly: failure events only matter for 2h (skip-list) and 24h (display).
    "cleanup-old-rate-limit-events": {
        "task": "subscriptions.cleanup_old_rate_limit_events",
        "schedule": HOUR,
        "options": {"expires": HOUR},
    },
    # Every minute: revive agents recorded as running whose server died.
    "supervise-agents": {
        "task": "agents.supervise",
        "schedule": 60,
        "options": {"expires": 60},
    },
}
