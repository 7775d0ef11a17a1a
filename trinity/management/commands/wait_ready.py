"""Wait until the platform can serve, then run a command in this process's place.

    python manage.py wait_ready [--timeout SECONDS] [-- COMMAND [ARG ...]]

"Ready" is what ``/readyz`` answers (trinity/health.py): the database answers with
every migration this code knows applied, and the cache and the broker answer. A swarm
stack (deploy/stack.yaml) starts every service at once and ignores ``depends_on``, so
web, worker, beat and the gateway start through this: none of them runs against a
schema the migrate service has not finished, and none is restarted in a loop while
Postgres or Redis come up. With COMMAND, the process becomes it (``exec``: the same
PID, so the orchestrator's signals reach it); without, it exits 0. It exits 1 when the
timeout passes first, naming the checks that were not ``ok`` (never an error text).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from trinity.health import readiness_check

POLL_SECONDS = 2.0
# How often the wait says what it still waits for.
REPORT_SECONDS = 30.0


class Command(BaseCommand):
    help = "Wait until /readyz's checks pass (migrations applied), then exec COMMAND."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--timeout",
            type=float,
            default=600.0,
            help="seconds to wait before exiting 1 (default 600)",
        )
        parser.add_argument("command", nargs=argparse.REMAINDER)

    def handle(self, *args: Any, **options: Any) -> None:
        command: list[str] = list(options["command"])
        if command[:1] == ["--"]:
            command = command[1:]
        self._wait(options["timeout"])
        if not command:
            return
        # Nothing of this process's outlives the exec but what it passes on: the
        # database connections the checks opened go first.
        connections.close_all()
        self.stdout.flush()
        os.execvp(command[0], command)  # noqa: S606 - the stack's own command line

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        next_report = time.monotonic()
        while True:
            checks = readiness_check().checks
            waiting = {name: state for name, state in checks.items() if state != "ok"}
            if not waiting:
                self.stdout.write("ready: " + ", ".join(f"{n} ok" for n in checks))
                return
            summary = ", ".join(f"{name} {state}" for name, state in waiting.items())
            if time.monotonic() >= deadline:
                raise CommandError(f"not ready after {timeout:g} s: {summary}")
            if time.monotonic() >= next_report:
                self.stdout.write(f"waiting: {summary}")
                next_report = time.monotonic() + REPORT_SECONDS
            # Waiting for the database, the migrate service or Redis to come up.
            time.sleep(POLL_SECONDS)
