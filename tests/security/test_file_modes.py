"""The embedded default's files: var/ is 0700, and every file the platform writes there
(the generated secrets, the SQLite file and its -wal/-shm journals) 0600, so no other
local user can read an API token's digest, a session, ``secret_key`` or
``encryption.key``. An install made before this is tightened at startup, said once.

Each test boots the platform in a subprocess with the umask most systems have (022),
on the embedded SQLite default under a fresh ``TRINITY_VAR_DIR``, and writes through a
real connection before it looks at the modes.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Writes a row through Django's connection (WAL mode: the -wal and -shm files appear),
# then reports every mode while that connection is still open.
WRITE_THEN_STAT = """
import json, os, stat
os.umask(0o022)
import django
django.setup()
from django.conf import settings
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("CREATE TABLE IF NOT EXISTS probe (n integer)")
    cursor.execute("INSERT INTO probe (n) VALUES (1)")
var = settings.VAR_DIR
# A file some library opens later with the default mode (celery beat's schedule, the
# filesystem broker's queues): the process's umask decides it.
with open(var / "written-later", "w") as later:
    later.write("x")
(var / "made-later").mkdir(exist_ok=True)
modes = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in var.iterdir() if p.is_file()}
modes["var/"] = oct(stat.S_IMODE(var.stat().st_mode))
modes["made-later/"] = oct(stat.S_IMODE((var / "made-later").stat().st_mode))
print(json.dumps(modes))
"""


def _boot(var: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "TRINITY_ENCRYPTION_KEYS", "SECRET_KEY"}
    }
    env.update({"DJANGO_SETTINGS_MODULE": "trinity.settings", "TRINITY_VAR_DIR": str(var)})
    return subprocess.run(
        [sys.executable, "-c", WRITE_THEN_STAT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _modes(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    modes: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    return modes


def test_a_fresh_install_keeps_var_0700_and_every_file_in_it_0600(tmp_path: Path) -> None:
    var = tmp_path / "var"
    modes = _modes(_boot(var))
    assert modes.pop("var/") == "0o700"
    assert modes.pop("made-later/") == "0o700"
    assert "written-later" in modes, sorted(modes)
    for name in ("secret_key", "encryption.key", "trinity.sqlite3"):
        assert name in modes, sorted(modes)
    assert "trinity.sqlite3-wal" in modes and "trinity.sqlite3-shm" in modes, sorted(modes)
    assert modes == dict.fromkeys(modes, "0o600")


def test_an_older_install_with_loose_modes_is_tightened_and_says_so_once(tmp_path: Path) -> None:
    var = tmp_path / "var"
    first = _boot(var)
    _modes(first)
    os.chmod(var, 0o755)  # noqa: S103 - the loose install under test
    for name in ("secret_key", "encryption.key", "trinity.sqlite3"):
        os.chmod(var / name, 0o644)

    tightened = _boot(var)
    modes = _modes(tightened)
    assert modes.pop("var/") == "0o700"
    modes.pop("made-later/")
    assert modes == dict.fromkeys(modes, "0o600")
    lines = [line for line in tightened.stderr.splitlines() if "tightened" in line]
    assert len(lines) == 1, tightened.stderr
    assert "secret_key" in lines[0] and "trinity.sqlite3" in lines[0]

    again = _boot(var)
    _modes(again)
    assert "tightened" not in again.stderr


def test_a_symlink_in_var_is_not_followed(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir()
    outside = tmp_path / "not-ours"
    outside.write_text("x")
    os.chmod(outside, 0o644)
    (var / "link").symlink_to(outside)
    _modes(_boot(var))
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
