"""A plan's rung as a turn sends it: each signed-in provider's current access token,
refreshed first when due (``subscriptions/plan_refresh.py``)."""

from __future__ import annotations

from datetime import datetime

from routing.rung import Rung
from subscriptions.claude_refresh import claude_wire_rung
from subscriptions.codex_refresh import codex_wire_rung


def plan_wire_rung(rung: Rung, *, now: datetime) -> Rung:
    """``rung`` with the token it goes on the wire with; a key's rung, a pasted Claude
    token and a token that holds are sent as they are."""
    return claude_wire_rung(codex_wire_rung(rung, now=now), now=now)
