"""Handing a turn to a worker, by its task's stable name.

The services that enqueue a turn (a queued turn once admitted, a parked turn at its
instant) are what the task module calls, so they must not import it back: they look
the task up by name in the Celery app's registry instead. ``execution.apps`` imports
the task module when Django starts, so the registry always holds it.
"""

from __future__ import annotations

from datetime import datetime

from trinity.celery import app

RUN_TURN = "execution.run_turn"
RUN_PARKED_TURN = "execution.run_parked_turn"


def turn_hand_over(execution_id: str) -> None:
    """Enqueue the queued turn for a worker."""
    app.tasks[RUN_TURN].delay(execution_id)


def parked_turn_hand_over(execution_id: str, *, eta: datetime | None = None) -> None:
    """Enqueue the parked turn's re-dispatch at ``eta`` (now when None)."""
    task = app.tasks[RUN_PARKED_TURN]
    if eta is None:
        task.delay(execution_id)
    else:
        task.apply_async((execution_id,), eta=eta)
