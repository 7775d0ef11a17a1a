"""The platform's Celery app for the worker-loss tests: the same tasks and settings, with
the Redis broker's redelivery of unacknowledged messages brought from an hour down to
seconds (the visibility timeout, and how often a worker scans for such messages), so a
message a killed worker left unacknowledged comes back within the test's bounds."""

from __future__ import annotations

from trinity.celery import app

VISIBILITY_TIMEOUT = 5

app.conf.broker_transport_options = {
    "visibility_timeout": VISIBILITY_TIMEOUT,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}

__all__ = ["app"]
