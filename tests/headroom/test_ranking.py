"""Table tests for the ranking (``ranking.py``), boundaries included."""

from __future__ import annotations

from datetime import datetime, timedelta

from routing.eligibility import Admission, Candidate
from routing.headroom.candidates import in_load_balance_order
from routing.headroom.classification import Tier
from routing.headroom.ranking import rank_candidates
from routing.headroom.reading import Reading, ReadingStatus
from routing.headroom.recovery import Verdict
from tests.headroom.readings import T0, limited, reading

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
MAX_AGE = HOUR


def _c(pk: int, agents: int = 0, failed: datetime | None = None) -> Candidate:
    return Candidate(pk, f"plan-{pk}", agents, failed)


def test_measured_candidates_rank_by_band_then_agent_count_then_given_order() -> None:
    candidates = [_c(1, 0), _c(2, 1), _c(3, 1), _c(4, 2), _c(5, 0)]
    readings = {
        1: reading(five_hour=0, seven_day=25.0),  # band 2
        2: reading(five_hour=0, seven_day=12.0),  # band 1, 1 agent
        3: reading(five_hour=0, seven_day=19.9),  # band 1, 1 agent: after 2 (given order)
        4: reading(five_hour=0, seven_day=10.0),  # band 1, 2 agents
        5: reading(five_hour=0, seven_day=20.0),  # band 2 (the edge), 0 agents
    }
    admission = Admission(now=T0, provider="anthropic", max_age=MAX_AGE)
    ranking = rank_candidates(candidates, readings, admission)
    assert [r.candidate.subscription_id for r in ranking.ranked] == [2, 3, 4, 1, 5]
    assert all(r.tier is Tier.MEASURED for r in ranking.ranked)
    # Given out of load-balance order (above) each band is put in it; given in it (as
    # every source gives them), the order is taken as it comes: the same ranking.
    in_order = in_load_balance_order(list(candidates))
    assert [c.subscription_id for c in in_order] == [1, 5, 2, 3, 4]
    ranked = rank_candidates(in_order, readings, admission).ranked
    assert [r.candidate.subscription_id for r in ranked] == [2, 3, 4, 1, 5]


def test_a_stale_five_hour_figure_no_longer_pushes_a_candidate_down() -> None:
    candidates = [_c(1), _c(2)]
    readings = {
        1: reading(five_hour=95.0, seven_day=30.0, age=31 * MINUTE),  # ranks on 30
        2: reading(five_hour=0, seven_day=50.0),
    }
    ranking = rank_candidates(
        candidates, readings, Admission(now=T0, provider="anthropic", max_age=MAX_AGE)
    )
    assert [r.candidate.subscription_id for r in ranking.ranked] == [1, 2]
    fresh = {**readings, 1: reading(five_hour=95.0, seven_day=30.0, age=30 * MINUTE)}
    ranking = rank_candidates(
        candidates, fresh, Admission(now=T0, provider="anthropic", max_age=MAX_AGE)
    )
    assert [r.candidate.subscription_id for r in ranking.ranked] == [2, 1]


def test_unknown_follow_measured_in_load_balance_order_and_fresh_refusals_drop() -> None:
    candidates = [_c(1), _c(2), _c(3), _c(4), _c(5)]
    readings = {
        2: reading(seven_day=80.0),
        3: limited(),
        4: reading(age=2 * HOUR),  # stale: unknown
        5: Reading(fetched_at=T0, status=ReadingStatus.INVALID_TOKEN),
    }
    ranking = rank_candidates(
        candidates, readings, Admission(now=T0, provider="anthropic", max_age=MAX_AGE)
    )
    assert [(r.candidate.subscription_id, r.tier) for r in ranking.ranked] == [
        (2, Tier.MEASURED),
        (1, Tier.UNKNOWN),
        (4, Tier.UNKNOWN),
    ]
    assert [c.subscription_id for c in ranking.dropped] == [3, 5]
    assert ranking.last_resort == ()


def test_skip_listed_candidates_rank_only_when_readmitted() -> None:
    failed = T0 - 30 * MINUTE
    candidates = [_c(1, failed=failed), _c(2, failed=failed), _c(3, failed=failed), _c(4)]
    readings = {
        1: reading(seven_day=10.0, age=MINUTE),  # serving since the failure
        2: limited(age=50 * MINUTE, resets_in=-MINUTE),  # its window reset after the failure
        # 3: no reading: absence of evidence readmits nothing
        4: reading(seven_day=60.0),
    }
    ranking = rank_candidates(
        candidates, readings, Admission(now=T0, provider="anthropic", max_age=MAX_AGE)
    )
    assert [(r.candidate.subscription_id, r.tier, r.readmitted) for r in ranking.ranked] == [
        (1, Tier.MEASURED, Verdict.SERVING_NOW),
        (4, Tier.MEASURED, None),
        (2, Tier.UNKNOWN, Verdict.WINDOW_RESET),
    ]
    assert [c.subscription_id for c in ranking.last_resort] == [3]
