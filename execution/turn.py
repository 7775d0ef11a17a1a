"""The executor of a turn: gather evidence, ask the planner, apply its action, loop.

Every routing decision is the planner's (``routing/planner``): this module and
the ones it calls only read what the planner asks for (``execution/gathering.py``),
send what it says to send (``execution/sending.py``) and finish the row as it says
(``execution/served.py``, ``execution/finishing.py``). Each rung is a trial: the same
execution id re-issued with ``auth_override``; nothing in the database or the agent
changes until a trial serves, and then the plan that served is committed once.

The served path costs one cache GET (the breaker), one cached read (the assignment's
evidence), one pooled request and one write after; ranking and the walk run only
after a refusal.
"""

from __future__ import annotations

import contextlib
import logging
import time

from django.db import DatabaseError

from agents.models import Agent
from execution.finishing import ended, finish_after_database_loss, finish_failed
from execution.gathering import evidence_gather
from execution.live.cancel import TurnCancelled, finish_cancelled
from execution.live.turn_events import turn_ended
from execution.models import Execution, Status
from execution.protection import key_settle, protection_release
from execution.sending import record, send
from execution.served import served
from execution.turn_state import TurnState, turn_state_start
from routing.planner import Fail, Finish, Need, Park, Record, Send, plan
from trinity import clock, metrics
from trinity_contract.log_json import log_context

logger = logging.getLogger(__name__)

# Far more than any turn needs (a walk is bounded by its rung cap): a planner that
# never ends the turn is a bug, and fails it instead of spinning.
MAX_STEPS = 1000


def turn_dispatch(*, execution: Execution, agent: Agent) -> Execution:
    """Run the turn to its end. Every path finishes the row; never raises for a failed
    turn. A bug anywhere fails it ``container_fault`` with its traceback in the
    (redacted) log, instead of leaving the row ``running``."""
    state = turn_state_start(execution, agent)
    # Only an assignment already loaded with the agent names it: no query for a log field.
    assigned = agent.subscription if Agent.subscription.is_cached(agent) else None
    with log_context(
        execution_id=str(execution.pk),
        agent=agent.name,
        subscription=assigned.name if assigned is not None else "",
    ):
        try:
            finished = _run(state)
        except TurnCancelled as cancelled:
            finished = finish_cancelled(state, cancelled)
        except DatabaseError:
            finished = finish_after_database_loss(execution)
        except Exception:
            logger.exception("turn %s on %s: internal error", execution.pk, agent.name)
            finished = finish_failed(
                execution,
                error_code="container_fault",
                detail="internal error in the platform while running the turn (see its log)",
            )
        # A path that ended between the reservation and its settle (a bug, a lost
        # database): the attempt's cost is unknown, so it is charged at the estimate.
        with contextlib.suppress(DatabaseError):
            key_settle(state, None)
        protection_release(state, served=finished.status == Status.SUCCEEDED)
        turn_ended(state.events, finished)
        _observe(state, finished)
    return finished


def _run(state: TurnState) -> Execution:
    """The loop: the planner's next action until one ends the turn."""
    for _ in range(MAX_STEPS):
        action = plan(state.evidence, now=clock.now())
        if isinstance(action, Need):
            evidence_gather(state, action)
        elif isinstance(action, Send):
            send(state, action)
        elif isinstance(action, Record):
            record(state, action)
        elif isinstance(action, Finish):
            return served(state, action)
        elif isinstance(action, Park | Fail):
            return ended(state, action)
    raise RuntimeError(f"the planner did not end turn {state.holder} in {MAX_STEPS} steps")


def _observe(state: TurnState, execution: Execution) -> None:
    """Count the finished turn (trinity/metrics.py): from memory, no reads."""
    if execution.status == Status.PARKED:
        return  # not finished: counted once, when its re-run finishes
    succeeded = execution.status == Status.SUCCEEDED
    attempts = state.attempts
    if succeeded:
        kind = execution.served_by_kind
    else:
        kind = attempts[-1]["credential_kind"] if attempts else ""
    credential = metrics.credential_kind(kind)
    switch = execution.subscription_switch or {}
    metrics.turn_finished(
        succeeded=succeeded,
        error_code=execution.error_code,
        credential=credential,
        rungs=len(attempts),
        switched=succeeded and bool(switch.get("committed")),
        routed=state.routed,
        exhausted=state.exhausted,
        input_tokens=execution.input_tokens or 0,
        output_tokens=execution.output_tokens or 0,
        key_usd=float(execution.cost_usd or 0) if succeeded and credential == metrics.KEY else 0,
        overhead_seconds=time.perf_counter() - state.started - state.waited,
    )
