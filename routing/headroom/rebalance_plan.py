"""Which agents the balanced strategy moves, and where, off the turn path.

Pure, no Django and no Redis; ``rebalance.py`` applies the plan (the sampler's sweep).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from routing.eligibility import Admission, Candidate
from routing.headroom.balance import Balance, balance_of
from routing.headroom.hysteresis import Move, hysteresis_move
from routing.headroom.ranking import BALANCED, Ranked, Ranking, rank_candidates
from routing.headroom.reading import Reading
from routing.policy import THRIFTY


class Rebalance(NamedTuple):
    """One move ``rebalance_plan`` proposes: ``agent`` (the caller's key) from its
    subscription ``from_id`` to ``to`` (a ranked candidate), and why."""

    agent: Hashable
    from_id: int
    to: Ranked
    move: Move
    incumbent: Balance | None
    challenger: Balance


def rebalance_plan(
    agents: Sequence[tuple[Hashable, int, str | None]],
    candidates: Sequence[Candidate],
    readings: Mapping[int, Reading],
    *,
    now: datetime,
    max_age: timedelta,
    provider: str,
    routing_policy: str = THRIFTY,
) -> list[Rebalance]:
    """The moves the hysteresis calls for, off the turn path (the sampler's sweep).

    ``agents`` are (key, assigned subscription, family window) in the order to
    consider them; ``candidates`` every subscription they may move to, in
    load-balance order, judged for agents of ``routing_policy`` (``eligibility``: a
    paused plan, or one the policy forbids, takes no agent). Each agent's challenger is
    the best balanced candidate (``rank_candidates``) other than its own;
    ``hysteresis_move`` decides. An incumbent ``admit`` excludes (refusing, refused
    within the skip window and not readmitted, paused) counts as refusing. Each
    subscription receives at most one agent per plan: the readings move only at the
    next sweep, and agents piled onto one plan on the same evidence would drain it
    together (the next agent takes the next best).
    """
    rankings: dict[str | None, tuple[Ranking, frozenset[int]]] = {}
    taken: set[int] = set()
    moves: list[Rebalance] = []
    for key, current, family in agents:
        found = rankings.get(family)
        if found is None:
            admission = Admission(
                now=now,
                provider=provider,
                routing_policy=routing_policy,
                family=family,
                max_age=max_age,
            )
            found = rankings[family] = _family_ranking(candidates, readings, admission)
        ranking, refused = found
        target = _challenger(ranking, current, taken)
        if target is None or target.score is None:
            continue  # nothing measured to move to: admitted candidates rank first
        challenger = balance_of(
            readings.get(target.candidate.subscription_id), now=now, max_age=max_age, family=family
        )
        if challenger is None:
            continue
        incumbent = balance_of(readings.get(current), now=now, max_age=max_age, family=family)
        move = hysteresis_move(incumbent, challenger, incumbent_refusing=current in refused)
        if move is Move.STAY:
            continue
        taken.add(target.candidate.subscription_id)
        moves.append(Rebalance(key, current, target, move, incumbent, challenger))
    return moves


def _family_ranking(
    candidates: Sequence[Candidate], readings: Mapping[int, Reading], admission: Admission
) -> tuple[Ranking, frozenset[int]]:
    """The balanced ranking of ``candidates`` for the agents ``admission`` speaks for (one
    family), and the ids it excludes: an incumbent among them counts as refusing."""
    ranking = rank_candidates(candidates, readings, admission, strategy=BALANCED)
    return ranking, frozenset(j.candidate.subscription_id for j in ranking.excluded)


def _challenger(ranking: Ranking, current: int, taken: set[int]) -> Ranked | None:
    """The best ranked candidate other than the agent's own plan (``current``) and the
    plans that already received an agent in this plan (``taken``); None: none left."""
    return next(
        (
            r
            for r in ranking.ranked
            if r.candidate.subscription_id != current and r.candidate.subscription_id not in taken
        ),
        None,
    )
