"""Candidates: the provider's plans as their rows state them (``eligibility.Candidate``),
built and ordered one way for every source.

Pure, no Django and no Redis. Every source of candidates (the database query in
``subscriptions/plan_facts.py``, the fleet benchmark's in-memory pool) builds them
from the same facts with ``candidate_of`` (or ``candidate_row``, the same as a row
factory) and orders them with ``in_load_balance_order``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from operator import itemgetter
from typing import Any

from routing.eligibility import Candidate


def candidate_of(facts: Sequence[Any]) -> Candidate:
    """The candidate of one subscription from its facts, in ``Candidate``'s order, every
    one of them: subscription id, name, agent count; of its latest refusal inside the
    skip window (of any kind) the instant, the reset it carried, the window it named
    and its failure kind (the two instants aware datetimes, None when there is none);
    whether it is paused; its plan type, billing class and overage."""
    return _new(Candidate, facts)


_new = tuple.__new__
# ``candidate_of`` as a C-level callable, for a database driver's row factory: 10,000
# rows built without a Python call each.
candidate_row = partial(_new, Candidate)


_agent_count = itemgetter(2)


class LoadBalanced(list[Candidate]):
    """Candidates in load-balance order, as ``in_load_balance_order`` returns them: the
    ranking takes them so without checking (``ranking.rank_candidates``)."""


def in_load_balance_order(candidates: list[Candidate]) -> LoadBalanced:
    """``candidates``, given in name order, in load-balance order: fewest agents first,
    name order within a count. Sorts the list in place and returns it as
    ``LoadBalanced`` (a copy of the list, not of the candidates).

    A stable sort on the agent count of rows in their source's name order: the
    database's (its collation) or the caller's. Sorting 10,000 rows by (count, name)
    in the database costs more than the query around it.
    """
    candidates.sort(key=_agent_count)
    return LoadBalanced(candidates)
