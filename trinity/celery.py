"""The Celery app. The beat schedule is code; each entry expires after about one period."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import beat_init, setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trinity.settings")

app = Celery("trinity")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

HOUR = 3600


@setup_logging.connect
def _log_through_django(**kwargs: object) -> None:
    """Worker, beat and pool children log through Django's ``LOGGING`` (redacting).

    Without a receiver Celery configures logging itself: it replaces the root
    handlers (``worker_hijack_root_logger``) and gives ``celery.task`` a handler of
    its own that does not propagate, so every line would bypass the redacting
    filter. With one, Celery installs no handler at all. Its ``--loglevel`` is
    ignored: ``LOG_LEVEL`` sets the level for every process alike.
    """
    import logging.config

    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


app.conf.beat_schedule = {
    # Hourly: failure events only matter for 2h (skip-list) and 24h (display).
    "cleanup-old-rate-limit-events": {
        "task": "subscriptions.cleanup_old_rate_limit_events",
        "schedule": HOUR,
        "options": {"expires": HOUR},
    },
    # Hourly: drop finished turns' events (their replay) past their retention.
    "prune-turn-events": {
        "task": "execution.prune_turn_events",
        "schedule": HOUR,
        "options": {"expires": HOUR},
    },
    # Every minute: revive agents recorded as running whose server died.
    "supervise-agents": {
        "task": "agents.supervise",
        "schedule": 60,
        "options": {"expires": 60},
    },
    # Every minute: fail turns left running or queued past their deadline (worker_lost).
    "reap-lost-turns": {
        "task": "execution.reap_lost_turns",
        "schedule": 60,
        "options": {"expires": 60},
    },
    # Every minute: fire due agent schedules (cron has minute resolution).
    "fire-schedules": {
        "task": "execution.fire_schedules",
        "schedule": 60,
        "options": {"expires": 60},
    },
    # Every minute: re-send parked turns whose eta message a broker or worker lost.
    "resend-parked-turns": {
        "task": "execution.resend_parked_turns",
        "schedule": 60,
        "options": {"expires": 60},
    },
    # Every 5 minutes: plan the week ahead (a plan is acted on for 30 minutes).
    "week-plan-solve": {
        "task": "subscriptions.week_plan_solve",
        "schedule": 300,
        "options": {"expires": 300},
    },
    # Every 5 minutes: re-enqueue webhook deliveries whose message a broker or worker lost.
    "resume-notification-deliveries": {
        "task": "trinity.resume_notification_deliveries",
        "schedule": 300,
        "options": {"expires": 300},
    },
    # Hourly: drop audit entries past TRINITY_AUDIT_RETENTION_DAYS, a batch at a time.
    "prune-audit-log": {
        "task": "audit.prune",
        "schedule": HOUR,
        "options": {"expires": HOUR},
    },
}


@app.on_after_configure.connect
def _headroom_schedule(sender: Celery, **kwargs: object) -> None:
    # The cadence is a setting, and settings cannot be read while this module is
    # imported (trinity.settings imports the trinity package, which imports this).
    from django.conf import settings

    every = settings.TRINITY_HEADROOM_SAMPLE_SECONDS
    sender.conf.beat_schedule.update(
        {
            # Every TRINITY_HEADROOM_SAMPLE_SECONDS (default 5 min): probe the due subscriptions.
            "headroom-sweep": {
                "task": "subscriptions.headroom_sweep",
                "schedule": every,
                "options": {"expires": every},
            },
            # Hourly: drop headroom history past its retention (30 days by default).
            "headroom-history-prune": {
                "task": "subscriptions.headroom_history_prune",
                "schedule": HOUR,
                "options": {"expires": HOUR},
            },
        }
    )


@beat_init.connect
def _first_headroom_sweep(sender: object, **kwargs: object) -> None:
    """Sweep headroom once as beat starts, not one period later.

    An interval entry first fires a whole period after beat starts (300 s by
    default), and until then every plan reads "no reading yet" and the walk ranks
    without headroom. The sweep's leader marker keeps this from doubling a sweep
    another beat is running; ``expires`` is the period, like the entry's.
    """
    from django.conf import settings

    app.send_task("subscriptions.headroom_sweep", expires=settings.TRINITY_HEADROOM_SAMPLE_SECONDS)


@beat_init.connect
def _first_week_plan(sender: object, **kwargs: object) -> None:
    """Plan the week once as beat starts (an interval entry would first fire 5 minutes
    later), after the first sweep has had time to store readings. The solve marker
    keeps this from doubling a run another beat started."""
    app.send_task("subscriptions.week_plan_solve", countdown=30, expires=300)
