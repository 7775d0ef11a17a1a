"""The gateway keys the process knows, read through an in-memory cache.

A presented key is hashed and looked up here; a miss reads the database once (in the
thread pool) and remembers the answer, an unknown digest too for a few seconds, so a
client hammering with a wrong key costs one query per digest per period, not one per
request. ``poll`` re-reads every key changed since the last poll (``updated_at``):
a revoked or changed key takes effect within ``TRINITY_GATEWAY_POLL_SECONDS`` in every
gateway process, and ``on_revoked`` ends a revoked key's open streams. A key whose owner
is deactivated is refused the same way: read with the key on a miss, and each poll
re-reads which keys' owners are inactive (a deactivation moves no key's ``updated_at``,
and a sign-in, the admin or a script may deactivate).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final

from gateway.keys import key_digest
from gateway.limits import KeyLimits, key_limits
from gateway.models import GatewayKey

# How long an unknown digest is remembered as unknown.
UNKNOWN_SECONDS: Final = 5.0
# How far back each poll reads again (longer than any key write's transaction).
POLL_OVERLAP: Final = timedelta(seconds=10)
# Unknown digests remembered at most (a flood of random keys cannot grow memory).
MAX_UNKNOWN: Final = 10_000
# Why a key is refused, as its client reads it (also on a stream the refusal ended).
REVOKED: Final = "this gateway key was revoked"
OWNER_INACTIVE: Final = "this gateway key's owner is deactivated"


@dataclass(frozen=True, slots=True)
class KeyPolicy:
    """What the gateway needs of one key (no digest, no key)."""

    key_id: int
    owner_id: int
    name: str
    expires_at: datetime | None
    revoked: bool
    providers: frozenset[str]
    families: frozenset[str]
    limits: KeyLimits
    owner_active: bool = True

    def refusal(self, now: datetime) -> str:
        """Why the key is refused now ("" when it is live)."""
        if self.revoked:
            return REVOKED
        if not self.owner_active:
            return OWNER_INACTIVE
        if self.expires_at is not None and self.expires_at <= now:
            return "this gateway key has expired"
        return ""

    def allows(self, provider: str, family: str | None = None) -> bool:
        if self.providers and provider not in self.providers:
            return False
        return not (family is not None and self.families and family not in self.families)


def policy_of(row: GatewayKey) -> KeyPolicy:
    return KeyPolicy(
        key_id=row.pk,
        owner_id=row.owner_id,
        name=row.name,
        expires_at=row.expires_at,
        revoked=row.revoked_at is not None,
        providers=frozenset(row.providers or ()),
        families=frozenset(row.model_families or ()),
        limits=key_limits(row),
        owner_active=row.owner.is_active,
    )


def read_by_digest(digest: str) -> KeyPolicy | None:
    """One key by its digest (a database read; the thread pool's)."""
    row = GatewayKey.objects.select_related("owner").filter(digest=digest).first()
    return policy_of(row) if row is not None else None


def read_changed(since: datetime | None) -> tuple[list[tuple[str, KeyPolicy]], datetime | None]:
    """Every key changed after ``since`` less ``POLL_OVERLAP`` (all when None), in one
    query, and the newest change seen.

    The overlap: ``updated_at`` is the writer's clock, stamped before its transaction
    commits, so a change committed after a poll can carry an instant that poll already
    passed; read again, it is applied again (applying is idempotent), never missed. A
    revocation a poll missed would leave the key serving in this process."""
    rows = GatewayKey.objects.select_related("owner").order_by("updated_at")
    if since is not None:
        rows = rows.filter(updated_at__gt=since - POLL_OVERLAP)
    found = [(row.digest, policy_of(row), row.updated_at) for row in rows]
    newest = max((at for _, _, at in found), default=since)
    return [(digest, policy) for digest, policy, _ in found], newest


def read_owner_inactive() -> frozenset[int]:
    """The ids of the unrevoked keys whose owner is deactivated (one query)."""
    rows = GatewayKey.objects.filter(owner__is_active=False, revoked_at__isnull=True)
    return frozenset(rows.values_list("pk", flat=True))


def read_poll(
    since: datetime | None,
) -> tuple[list[tuple[str, KeyPolicy]], datetime | None, frozenset[int]]:
    """What one poll reads: ``read_changed`` and ``read_owner_inactive``."""
    changed, newest = read_changed(since)
    return changed, newest, read_owner_inactive()


class KeyBook:
    """Digest -> KeyPolicy, for one process. Not thread-safe: the event loop's."""

    def __init__(self) -> None:
        self.known: dict[str, KeyPolicy] = {}
        self.unknown: dict[str, float] = {}
        self.since: datetime | None = None

    def cached(self, key: str) -> tuple[str, KeyPolicy | None, bool]:
        """(digest, the policy if known, whether the cache answered)."""
        digest = key_digest(key)
        policy = self.known.get(digest)
        if policy is not None:
            return digest, policy, True
        seen = self.unknown.get(digest)
        if seen is not None and time.monotonic() - seen < UNKNOWN_SECONDS:
            return digest, None, True
        return digest, None, False

    def learn(self, digest: str, policy: KeyPolicy | None) -> None:
        if policy is not None:
            self.known[digest] = policy
            self.unknown.pop(digest, None)
            return
        if len(self.unknown) >= MAX_UNKNOWN:
            self.unknown.clear()
        self.unknown[digest] = time.monotonic()

    def apply(
        self,
        changed: list[tuple[str, KeyPolicy]],
        newest: datetime | None,
        on_revoked: Callable[[int, str], None],
    ) -> None:
        """Take a poll's changes; each key that is refused now has its streams ended
        (``on_revoked`` is told the key and why)."""
        for digest, policy in changed:
            before = self.known.get(digest)
            if before is not None or digest in self.unknown:
                self.known[digest] = policy
                self.unknown.pop(digest, None)
            if policy.revoked or not policy.owner_active:
                on_revoked(policy.key_id, REVOKED if policy.revoked else OWNER_INACTIVE)
        self.since = newest

    def apply_owner_inactive(
        self, key_ids: frozenset[int], on_revoked: Callable[[int, str], None]
    ) -> None:
        """Refuse the known keys in ``key_ids`` (their owner is deactivated), ending
        their streams, and admit again those whose owner is active again."""
        for digest, policy in list(self.known.items()):
            active = policy.key_id not in key_ids
            if policy.owner_active == active:
                continue
            self.known[digest] = replace(policy, owner_active=active)
            if not active:
                on_revoked(policy.key_id, OWNER_INACTIVE)
