"""The week plan: where each agent should run and until when, each plan's reserve,
and the spill (what the key should take). Its JSON form is what the planning task
stores and what a turn reads (``Planned``, one agent's entry).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

# A plan older than this is stale: the turn falls back to today's rules.
STALE_AFTER = timedelta(minutes=30)
KEY = "key"  # an entry's ``kind`` when the key should take the agent's turns
PLAN = "plan"
KINDS = (PLAN, KEY)


@dataclass(frozen=True, slots=True)
class Planned:
    """One agent's entry: where its turns should run (``subscription_id``; None with
    ``kind`` KEY: the key takes them) until ``until``, and why, in words."""

    agent_id: int
    kind: str
    subscription_id: int | None
    name: str
    until: datetime
    because: str
    made_at: datetime

    def current(self, now: datetime) -> bool:
        """Whether a turn at ``now`` may act on this entry: fresh and not over."""
        return now - self.made_at <= STALE_AFTER and now < self.until

    @property
    def on_key(self) -> bool:
        return self.kind == KEY

    def text(self) -> str:
        """The explainer's line: "planned for max-b until Thu 09:00, because …"."""
        where = "the platform key" if self.on_key else self.name
        return f"planned for {where} until {self.until:%a %H:%M} UTC, because {self.because}"

    def to_json(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "kind": self.kind,
            "subscription_id": self.subscription_id,
            "name": self.name,
            "until": self.until.isoformat(),
            "because": self.because,
            "made_at": self.made_at.isoformat(),
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Planned:
        return cls(
            agent_id=int(raw["agent_id"]),
            kind=str(raw["kind"]),
            subscription_id=raw["subscription_id"],
            name=str(raw["name"]),
            until=datetime.fromisoformat(raw["until"]),
            because=str(raw["because"]),
            made_at=datetime.fromisoformat(raw["made_at"]),
        )


@dataclass(frozen=True, slots=True)
class Spill:
    """The key should take ``tokens`` of ``family``'s turns in [since, until)."""

    family: str | None
    since: datetime
    until: datetime
    tokens: float


@dataclass(frozen=True, slots=True)
class WeekPlan:
    made_at: datetime
    placements: tuple[Planned, ...]
    # Per plan: percent of its current weekly window kept for demand after the next
    # five hours (what the plan holds back), by subscription id.
    reserves: dict[int, float]
    spill: tuple[Spill, ...]
    # The key's planned spend over the horizon, and the demand it covers (Mtok).
    key_usd: float
    demand_mtok: float
    solve_seconds: float
    status: str

    def entry(self, agent_id: int) -> Planned | None:
        return next((p for p in self.placements if p.agent_id == agent_id), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "made_at": self.made_at.isoformat(),
            "placements": [p.to_json() for p in self.placements],
            "reserves": {str(k): round(v, 1) for k, v in self.reserves.items()},
            "spill": [
                {
                    "family": s.family,
                    "since": s.since.isoformat(),
                    "until": s.until.isoformat(),
                    "tokens": round(s.tokens),
                }
                for s in self.spill
            ],
            "key_usd": round(self.key_usd, 4),
            "demand_mtok": round(self.demand_mtok, 3),
            "solve_seconds": round(self.solve_seconds, 4),
            "status": self.status,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> WeekPlan:
        return cls(
            made_at=datetime.fromisoformat(raw["made_at"]),
            placements=tuple(Planned.from_json(p) for p in raw["placements"]),
            reserves={int(k): float(v) for k, v in raw["reserves"].items()},
            spill=tuple(
                Spill(
                    s["family"],
                    datetime.fromisoformat(s["since"]),
                    datetime.fromisoformat(s["until"]),
                    float(s["tokens"]),
                )
                for s in raw["spill"]
            ),
            key_usd=float(raw["key_usd"]),
            demand_mtok=float(raw["demand_mtok"]),
            solve_seconds=float(raw["solve_seconds"]),
            status=str(raw["status"]),
        )
