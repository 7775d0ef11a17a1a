"""Whether an agent should move from its plan to a better one, under the balanced
strategy: the floors and the margin that keep it from ping-ponging.

Pure, no Django and no Redis.
"""

from __future__ import annotations

from enum import StrEnum

from routing.headroom.balance import Balance, admitted, incumbent_holds

# A challenger displaces the incumbent only when its score is strictly more than 1.2
# times the incumbent's. 1.2 as a ratio of integers: ``score * 5 > incumbent * 6`` is
# exact at the boundary where ``score > incumbent * 1.2`` is at the mercy of 1.2's
# binary rounding.
DISPLACE_OVER, DISPLACE_UNDER = 6, 5


class Move(StrEnum):
    STAY = "stay"
    # The incumbent fell below its floor (or refuses) and an admitted plan exists.
    LEAVE = "leave"
    # Both hold, and the challenger scores strictly more than 20 % better.
    DISPLACE = "displace"


def hysteresis_move(
    incumbent: Balance | None, challenger: Balance | None, *, incumbent_refusing: bool = False
) -> Move:
    """Whether an agent on ``incumbent`` should move to ``challenger``.

    A challenger must be admitted (strictly above 5 %). An incumbent with no measure
    (no usable reading) stays: moving on missing telemetry is the walk's business,
    on a real refusal. A refusing incumbent, or one strictly below 2 %, leaves for
    any admitted challenger; otherwise the challenger must score strictly more than
    1.2 times the incumbent (exactly 20 % better does not displace).
    """
    if challenger is None or not admitted(challenger):
        return Move.STAY
    if incumbent_refusing:
        return Move.LEAVE
    if incumbent is None:
        return Move.STAY
    if not incumbent_holds(incumbent):
        return Move.LEAVE
    if challenger.score * DISPLACE_UNDER > incumbent.score * DISPLACE_OVER:
        return Move.DISPLACE
    return Move.STAY
