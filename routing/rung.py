"""A rung: one credential a turn attempt runs on.

One value serves four jobs: the ``auth_override`` on the wire, the attempt in the
execution's trail, the echo check of ``X-Trinity-Auth-Override``, and "served by".
An agent's own credential (what it boots with) is a rung too.

Pure: no Django and no I/O, so the walk core can build and compare rungs. The secret
is a ``trinity.crypto.Secret`` (typed as ``SecretValue``; never printed: ``repr=False``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from routing.providers import ANTHROPIC, OPENAI
from routing.secret import SecretValue


class RungKind(StrEnum):
    SUBSCRIPTION = "subscription"
    API_KEY = "api_key"


# The environment variable each kind boots an agent with, and the override field and
# echo value each kind travels as.
_ENV_NAME = {
    (ANTHROPIC, RungKind.SUBSCRIPTION): "CLAUDE_CODE_OAUTH_TOKEN",
    (ANTHROPIC, RungKind.API_KEY): "ANTHROPIC_API_KEY",
    # A Codex plan never boots an agent: its tokens rotate, so each turn carries them.
    (OPENAI, RungKind.API_KEY): "OPENAI_API_KEY",
}
# A plan's token travels as ``oauth_token`` (a Codex plan's: its access token, with
# ``account_id``; never its refresh token, which only the platform holds), a key as
# ``api_key``; the agent's runtime knows whose.
_WIRE_KIND = {RungKind.SUBSCRIPTION: "oauth_token", RungKind.API_KEY: "api_key"}

PLATFORM_KEY_LABEL = "platform API key"


@dataclass(frozen=True, slots=True)
class Rung:
    """``kind`` and the ``secret`` it carries; ``subscription_id`` and ``name`` say whose
    it is (None and the platform key's label for the key rung); ``provider`` whose key
    a key rung is (a turn only ever holds its own agent's provider's key, so it is not
    part of the rung's identity)."""

    kind: RungKind
    secret: SecretValue = field(repr=False, compare=False)
    subscription_id: int | None = None
    name: str = PLATFORM_KEY_LABEL
    provider: str = field(default=ANTHROPIC, compare=False)
    # The ChatGPT account a Codex plan's access token is sent for (its wire form only:
    # ``subscriptions.codex_refresh.codex_wire_rung``).
    account_id: str = field(default="", compare=False)
    # When a signed-in Claude plan's access token expires (None: a pasted token, never
    # refreshed), read with its token so a turn judges it without another read
    # (``subscriptions.claude_refresh.claude_wire_rung``).
    expires_at: datetime | None = field(default=None, compare=False)

    @property
    def wire_kind(self) -> str:
        """The ``auth_override`` field this rung travels in, and the echo that names it."""
        return _WIRE_KIND[self.kind]

    def wire(self) -> dict[str, str]:
        """The ``auth_override`` body: ``{oauth_token: …}`` (with ``account_id`` for a
        Codex plan) XOR ``{api_key: …}``."""
        body = {self.wire_kind: self.secret.reveal()}
        if self.account_id:
            body["account_id"] = self.account_id
        return body

    @property
    def boots(self) -> bool:
        """Whether an agent server boots holding this credential (a Codex plan's
        rotating tokens never do: every turn carries them)."""
        return (self.provider, self.kind) in _ENV_NAME

    def env(self) -> dict[str, SecretValue]:
        """The boot environment entry that carries this credential ({} if it never
        boots one)."""
        name = _ENV_NAME.get((self.provider, self.kind))
        return {name: self.secret} if name is not None else {}

    def echoed_by(self, echo: str | None) -> bool:
        """Whether the agent server's echo says it applied this rung to the spawn."""
        return echo == self.wire_kind

    @property
    def key(self) -> tuple[str, int | None]:
        """Identity without the secret: two rungs with one key are the same credential."""
        return (self.kind.value, self.subscription_id)


class RungRef(NamedTuple):
    """A rung without its secret: what the planner sends on; the executor holds the secret."""

    kind: RungKind
    subscription_id: int | None
    name: str

    @property
    def key(self) -> tuple[str, int | None]:
        """The same identity as ``routing.rung.Rung.key``."""
        return (self.kind.value, self.subscription_id)


KEY_RUNG = RungRef(RungKind.API_KEY, None, PLATFORM_KEY_LABEL)
