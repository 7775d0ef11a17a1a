"""The prompt cache as the fleet world keeps it: where each session's prefix is warm.

A provider caches a prompt prefix per credential: a session's next request reads it
back cheaply (a cache read) while it is warm on the credential that serves it, and
writes it again (a cache write) otherwise. So a session that moves to another plan,
or to the key, pays a cache write there: the tokens it rebuilds are the price of the
move. The cache stays warm ``TTL`` after its last use (the provider's default
5-minute cache, refreshed by every read).

``PromptCache`` answers ``warm`` before a request is sent and is told ``used`` when
one was served; ``rebuilt`` counts the cached tokens written again because the
session's prefix was still warm somewhere else (a cold prefix would have been
written wherever the request went, so that write is no price of a move).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TTL_SECONDS = 5 * 60.0
# Where a session's prefix lives: a plan's subscription id, or None for the key.
Place = int | None


@dataclass
class PromptCache:
    # session -> (where its prefix is warm, the instant it was last used there)
    warm_at: dict[str, tuple[Place, float]] = field(default_factory=dict)
    rebuilt: int = 0

    def warm(self, session: str | None, place: Place, now: float) -> bool:
        """Whether ``session``'s prefix is warm on ``place`` at ``now``. A request
        without a session reads what it names as cached (the trace's own account)."""
        if session is None:
            return True
        found = self.warm_at.get(session)
        return found is not None and found[0] == place and now - found[1] <= TTL_SECONDS

    def used(self, session: str | None, place: Place, now: float, cached: int) -> None:
        """A request of ``session`` with ``cached`` prefix tokens was served on
        ``place`` at ``now``: its prefix is warm there from now on."""
        if session is None:
            return
        found = self.warm_at.get(session)
        moved = found is not None and found[0] != place and now - found[1] <= TTL_SECONDS
        if moved:
            self.rebuilt += cached
        self.warm_at[session] = (place, now)
