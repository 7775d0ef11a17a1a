"""What one agent server remembers between requests: runtime overrides, busy count."""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path

from agent_server.config import AgentConfig
from agent_server.contract import AppliedOverride
from agent_server.envlayer import (
    API_KEY_NAMES,
    OAUTH_TOKEN,
    layer_env,
    override_layers,
    read_dotenv,
)
from agent_server.redaction import Redactor, is_credential_name
from agent_server.runtimes.base import session_uuid
from agent_server.tokenfile import write_token_file

logger = logging.getLogger(__name__)


class AgentState:
    """Per-process state. Every mutation happens on the event loop thread."""

    def __init__(
        self, config: AgentConfig, *, baseline: Mapping[str, str], redactor: Redactor
    ) -> None:
        self.config = config
        self.baseline = dict(baseline)
        self.redactor = redactor
        self.runtime_overrides: dict[str, str | None] = {}
        self.busy = 0
        self._session_locks: dict[str, asyncio.Lock] = {}
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

    def force_unset_api_keys(self) -> None:
        for name in API_KEY_NAMES:
            self.runtime_overrides[name] = None

    def dotenv(self) -> dict[str, str]:
        """The agent's `.env`, re-read now; its credential values join the redactor."""
        values = read_dotenv(self.config.dotenv_path)
        self.redactor.add(*(v for k, v in values.items() if is_credential_name(k)))
        return values

    def reload_token(self, token: str, *, remove_api_key: bool) -> list[str]:
        """Make `token` the OAuth token of every later spawn; return the `.env` shadow.

        Writes the token file first: if that fails (OSError) nothing changes. Turns
        already running keep the environment they were spawned with. With
        `remove_api_key`, API-key names are force-unset for all later spawns; without
        it an earlier force-unset (e.g. the boot guard) stays armed. Returns the
        API-key names the `.env` file still carries, names only.
        """
        self.redactor.add(token)
        write_token_file(self.config.token_path, token)
        self.runtime_overrides[OAUTH_TOKEN] = token
        if remove_api_key:
            self.force_unset_api_keys()
        dotenv = self.dotenv()
        return [name for name in API_KEY_NAMES if dotenv.get(name)]

    def spawn_env(self, override: AppliedOverride | None, home: Path) -> dict[str, str]:
        if override is not None:
            self.redactor.add(override.secret)
        extra, drop = override_layers(override)
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
            home = self.config.state_dir / "spawns" / secrets.token_hex(8)
        else:
            home = self.config.state_dir / "sessions" / str(session_uuid(session_id))
        self.config.state_dir.mkdir(mode=0o700, exist_ok=True)
        home.parent.mkdir(mode=0o700, exist_ok=True)
        home.mkdir(mode=0o700, exist_ok=True)
        return home

    @staticmethod
    def discard_spawn_home(home: Path) -> None:
        shutil.rmtree(home, ignore_errors=True)

    def session_lock(self, session_id: str) -> asyncio.Lock:
        """Turns of one chat session run one at a time: they share one transcript."""
        return self._session_locks.setdefault(session_id, asyncio.Lock())
