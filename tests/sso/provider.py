"""The tests' OpenID provider as a real process: seeded, started on a free port, stopped.

django-oauth-toolkit's provider (``tests/sso/idp``) on its own SQLite file, signing ID
tokens with an RSA key made for this run. Trinity is its confidential client, with the
live server's callback as the redirect URI.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.operations.services import BOOT_SECONDS, _stop, free_port

REPO = Path(__file__).resolve().parents[2]
CLIENT_ID = "trinity-tests"
ADMINS = "trinity-admins"


def _rsa_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@dataclass
class IdentityProvider:
    """One provider process; ``platform_url`` is where Trinity (its client) runs."""

    directory: Path
    platform_url: str
    port: int = field(default_factory=free_port)
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    control_token: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def issuer(self) -> str:
        return f"{self.url}/o"

    @property
    def log_path(self) -> Path:
        return self.directory / "idp.log"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.sso.idp.settings",
            "IDP_SECRET_KEY": secrets.token_urlsafe(50),
            "IDP_DATABASE": str(self.directory / "idp.sqlite3"),
            "IDP_RSA_PRIVATE_KEY": _rsa_pem(),
            "IDP_ISSUER": self.issuer,
            "IDP_CONTROL_TOKEN": self.control_token,
            "IDP_CLIENT_ID": CLIENT_ID,
            "IDP_CLIENT_SECRET": self.client_secret,
            "IDP_REDIRECT_URI": f"{self.platform_url}/oidc/callback/",
            "IDP_POST_LOGOUT_REDIRECT_URI": f"{self.platform_url}/",
        }

    def start(self) -> None:
        env = self._env()
        subprocess.run(
            [sys.executable, "-m", "tests.sso.idp.seed"],
            cwd=REPO,
            env=env,
            check=True,
            capture_output=True,
            timeout=BOOT_SECONDS,
        )
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + BOOT_SECONDS
        discovery = f"{self.issuer}/.well-known/openid-configuration"
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"the test provider exited at boot:\n{self.log_path.read_text()}")
            try:
                if httpx.get(discovery, timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the test provider did not answer:\n{self.log_path.read_text()}")
            time.sleep(0.1)  # polling a real process's socket

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None

    def user(self, username: str, **values: Any) -> str:
        """Create or change a user at the provider (password, email, groups,
        rename_to); returns its subject."""
        answer = httpx.post(
            f"{self.url}/control/user",
            json={"username": username, **values},
            headers={"Authorization": f"Bearer {self.control_token}"},
            timeout=10,
        )
        answer.raise_for_status()
        return str(answer.json()["sub"])
