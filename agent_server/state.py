"""What one agent server remembers between requests: runtime overrides, busy count.

Credentials live here in memory only: the baseline environment, the reloaded token,
the per-request override. Nothing is written to disk (a restarted server is started
with the assignment's credential again), and the CLI gets none of them
(`agent_server/credentials.py` swaps the turn's credential for a forwarder capability).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path

from agent_server.config import AgentConfig
from agent_server.contract import AppliedOverride
from agent_server.credentials import CredentialScheme, scheme_for
from agent_server.envlayer import API_KEY_NAMES, OAUTH_TOKEN, layer_env, read_dotenv
from agent_server.isolation import WorkArea, own_dir, spawn_home_make, work_area_prepare
from agent_server.runtimes.base import session_uuid
from trinity_contract.redaction import Redactor, is_credential_name

logger = logging.getLogger(__name__)


class AgentState:
    """Per-process state. Every mutation happens on the event loop thread."""

    def __init__(
        self, config: AgentConfig, *, baseline: Mapping[str, str], redactor: Redactor
    ) -> None:
        self.config = config
        self.baseline = dict(baseline)
        self.redactor = redactor
        # Which variables carry this runtime's provider credentials.
        self.scheme: CredentialScheme = scheme_for(config.runtime)
        self.runtime_overrides: dict[str, str | None] = {}
        self.busy = 0
        self._session_locks: dict[str, asyncio.Lock] = {}
        # A configured area is laid out at boot (a bad one stops the server there); a
        # temporary one only when a spawn first needs it.
        self._area: WorkArea | None = None
        if config.work_area is not None:
            self._area = work_area_prepare(config.work_area, config.agent_user)
        if config.agent_user is not None:
            # The server's own directory (the `.env`, its log) is no business of the
            # agent user's, whatever mode it was created with.
            own_dir(config.home, mode=0o700)
        # A token an older server persisted beside the `.env` outlives its use: this
        # server keeps credentials in memory only.
        for path in config.legacy_token_files:
            path.unlink(missing_ok=True)
        redactor.add(config.secret)
        redactor.add_credentials_from(self.baseline)
        self.boot_guard_armed = False
        # After a restart the baseline carries the subscription token the lifecycle
        # layer set, but the agent's `.env` may still hold an API key from an older
        # setup; the CLI would prefer that key and bill it. Arm the same force-unset
        # reload-token applies, so the subscription is what the next spawn sends.
        if config.boot_guard and config.runtime == "claude-code" and self.baseline.get(OAUTH_TOKEN):
            self.force_unset_api_keys()
            self.boot_guard_armed = True
            logger.info("boot guard armed: %s are unset for every spawn", ", ".join(API_KEY_NAMES))

    @property
    def area(self) -> WorkArea:
        """The agent user's work area, laid out (or checked) on first use."""
        if self._area is None:
            self._area = work_area_prepare(self.config.work_area, self.config.agent_user)
        return self._area

    def force_unset_api_keys(self) -> None:
        for name in self.scheme.key_names:
            self.runtime_overrides[name] = None

    def dotenv(self) -> dict[str, str]:
        """The agent's `.env`, re-read now; its credential values join the redactor."""
        values = read_dotenv(self.config.dotenv_path)
        self.redactor.add(*(v for k, v in values.items() if is_credential_name(k)))
        return values

    def reload_token(self, token: str, *, remove_api_key: bool) -> list[str]:
        """Make `token` the plan token of every later spawn; return the `.env` shadow.

        Kept in this process's memory only (a restart boots on the assignment's
        credential again). Turns already running keep their credential. With
        `remove_api_key`, API-key names are force-unset for all later spawns; without
        it an earlier force-unset (e.g. the boot guard) stays armed. Returns the
        API-key names the `.env` file still carries, names only.
        """
        self.redactor.add(token)
        self.runtime_overrides[self.scheme.plan_name] = token
        for name in self.scheme.reload_unsets:
            self.runtime_overrides[name] = None
        if remove_api_key:
            self.force_unset_api_keys()
        dotenv = self.dotenv()
        return [name for name in self.scheme.key_names if dotenv.get(name)]

    def spawn_env(self, override: AppliedOverride | None, home: Path) -> dict[str, str]:
        if override is not None:
            self.redactor.add(override.secret)
        extra, drop = self.scheme.override_layers(override)
        return layer_env(
            baseline=self.baseline,
            dotenv=self.dotenv(),
            runtime_overrides=self.runtime_overrides,
            extra=extra,
            drop=drop,
            home=str(home),
        )

    def new_spawn_home(self, session_id: str | None) -> Path:
        """A private HOME for one spawn; a chat session reuses its own across turns.

        A task's HOME is fresh, so nothing the CLI caches (settings, credentials it
        writes, transcripts) leaks between turns that may run on different
        credentials. A chat session keeps its HOME because that is where the CLI
        stores the transcript `--resume` reads.
        """
        if session_id is None:
            name = f"spawn-{secrets.token_hex(8)}"
        else:
            name = f"session-{session_uuid(session_id)}"
        return spawn_home_make(self.area, name, self.config.agent_user)

    @staticmethod
    def discard_spawn_home(home: Path) -> None:
        # rmtree removes symlinks the agent left without following them.
        shutil.rmtree(home, ignore_errors=True)

    def close(self) -> None:
        """Remove a temporary work area this server made for itself."""
        if self._area is not None and self._area.ephemeral:
            shutil.rmtree(self._area.root, ignore_errors=True)

    def session_lock(self, session_id: str) -> asyncio.Lock:
        """Turns of one chat session run one at a time: they share one transcript."""
        return self._session_locks.setdefault(session_id, asyncio.Lock())
