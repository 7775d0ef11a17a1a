"""Configuration comes from the environment; a bad value fails loudly and by name."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]
SETUP = (
    "import django; django.setup(); from django.conf import settings; "
    "print(settings.DATABASES['default']['ENGINE'])"
)


def _boot(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "TRINITY_ENCRYPTION_KEYS", "SECRET_KEY", "DEBUG"}
    }
    env.update({"DJANGO_SETTINGS_MODULE": "trinity.settings", "TRINITY_VAR_DIR": str(tmp_path)})
    env.update(overrides)
    return subprocess.run(
        [sys.executable, "-c", SETUP], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DATABASE_URL", "nosuchdb://x"),
        ("REDIS_URL", "http://127.0.0.1:6379"),
        ("DEBUG", "maybe"),
        ("TRINITY_ENCRYPTION_KEYS", "not-a-fernet-key"),
        ("TRINITY_RATE_LIMIT_WINDOW_SECONDS", "two hours"),
        ("LOG_LEVEL", "LOUD"),
    ],
)
def test_a_bad_value_fails_loudly_naming_the_variable(
    tmp_path: Path, variable: str, value: str
) -> None:
    result = _boot(tmp_path, **{variable: value})
    assert result.returncode != 0
    assert variable in result.stderr
    if variable == "TRINITY_ENCRYPTION_KEYS":
        assert value not in result.stderr  # a key is a secret even when malformed


def test_nothing_set_runs_on_embedded_defaults_with_a_0600_key(tmp_path: Path) -> None:
    result = _boot(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "sqlite3" in result.stdout
    key_file = tmp_path / "encryption.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    Fernet(key_file.read_text().strip())  # a usable key
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600
    # A second boot reuses the key instead of minting one that cannot decrypt old rows.
    first = key_file.read_text()
    assert _boot(tmp_path).returncode == 0
    assert key_file.read_text() == first


def test_database_url_selects_postgres(tmp_path: Path) -> None:
    result = _boot(
        tmp_path,
        DATABASE_URL="postgres://root@127.0.0.1:5432/test",
        TRINITY_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
    )
    assert result.returncode == 0, result.stderr
    assert "postgresql" in result.stdout
