"""A candidate: what the ranking needs to know of one subscription an agent could run on.

Pure, no Django and no Redis. Every source of candidates (the database queries in
``selection.py``, the fleet benchmark's in-memory pool) builds them from the same
facts with ``candidate_of`` (or ``candidate_row``, the same as a row factory) and
orders them with ``in_load_balance_order``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from operator import itemgetter
from typing import Any, NamedTuple


class Candidate(NamedTuple):
    """A subscription the filter let through, in load-balance order.

    ``last_failure_at`` is set when it refused within the skip window (skip-listed),
    unless that refusal named another model family's window (``refusal_blocks``).
    """

    subscription_id: int
    name: str
    agent_count: int
    last_failure_at: datetime | None = None
    # The reset instant the latest refusal carried, when it carried one.
    last_failure_resets_at: datetime | None = None
    # The window the latest refusal named (``limiting_window``; "" or None: unknown).
    last_failure_window: str | None = None


def candidate_of(facts: Sequence[Any]) -> Candidate:
    """The candidate of one subscription from its facts, in this order: subscription
    id, name, agent count, and of its latest refusal inside the skip window (of any
    kind) the instant, the reset it carried and the window it named; the two instants
    aware datetimes, None when there is none."""
    return _new(Candidate, facts)


_new = tuple.__new__
# ``candidate_of`` as a C-level callable, for a database driver's row factory: 10,000
# rows built without a Python call each.
candidate_row = partial(_new, Candidate)


_agent_count = itemgetter(2)


def in_load_balance_order(candidates: list[Candidate]) -> list[Candidate]:
    """``candidates``, given in name order, in load-balance order: fewest agents first,
    name order within a count. Sorts the list in place and returns it.

    A stable sort on the agent count of rows in their source's name order: the
    database's (its collation) or the caller's. Sorting 10,000 rows by (count, name)
    in the database costs more than the query around it.
    """
    candidates.sort(key=_agent_count)
    return candidates
