"""Configuration comes from the environment; a bad value fails loudly and by name."""

from __future__ import annotations

import json
import os
import secrets
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

# What settings read through env_secret: from the variable, or from a file its _FILE names.
SECRET_NAMES = (
    "SECRET_KEY",
    "TRINITY_ENCRYPTION_KEYS",
    "TRINITY_METRICS_TOKEN",
    "DATABASE_URL",
    "REDIS_URL",
)


def _env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.removesuffix("_FILE") not in SECRET_NAMES
        and k != "DEBUG"
        and not k.startswith(("TRINITY_HTTPS", "TRINITY_TRUSTED_PROXIES"))
    }
    env.update({"DJANGO_SETTINGS_MODULE": "trinity.settings", "TRINITY_VAR_DIR": str(tmp_path)})
    env.update(overrides)
    return env


def _run(tmp_path: Path, code: str, **overrides: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=_env(tmp_path, **overrides),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _boot(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    return _run(tmp_path, SETUP, **overrides)


def _manage_check(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=_env(tmp_path, **overrides),
        capture_output=True,
        text=True,
        timeout=120,
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
        ("TRINITY_CHATGPT_DEVICE_URL", "auth.openai.com/codex/device"),
        ("TRINITY_AGENT_EGRESS_ALLOW", "git.internal:22"),
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


def test_the_platform_reads_no_agent_user(tmp_path: Path) -> None:
    """Each local agent has an OS user of its own (agents/runtimes/agent_users.py): a
    TRINITY_AGENT_USER in the platform's environment is no setting of its own (on the
    code before, this value stopped startup), and the variable is left to the agent
    server, which the platform hands each agent's own user."""
    code = f"{SETUP.split('; print')[0]}; print(hasattr(settings, 'TRINITY_AGENT_USER'))"
    result = _run(tmp_path, code, TRINITY_AGENT_USER="not a user name!")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


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


HTTPS_PROBE = (
    "import json, django; django.setup(); from django.conf import settings; "
    "from django.test import Client; "
    "r = Client().get('/api/auth/csrf', HTTP_X_FORWARDED_PROTO='https'); "
    "names = ['SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS', "
    "'SECURE_PROXY_SSL_HEADER', 'SECURE_SSL_REDIRECT']; "
    "values = {n: getattr(settings, n) for n in names}; "
    "values['hsts_header'] = r.headers.get('Strict-Transport-Security'); "
    "values['csrf_cookie_secure'] = bool(r.cookies['csrftoken']['secure']); "
    "values['plain_http'] = Client().get('/api/auth/csrf').status_code; "
    "values['plain_healthz'] = Client().get('/healthz').status_code; "
    "print(json.dumps(values))"
)

ONE_YEAR = 365 * 24 * 3600


@pytest.mark.parametrize(
    ("https", "expected"),
    [
        (
            None,  # the embedded default: plain HTTP on loopback
            {
                "SESSION_COOKIE_SECURE": False,
                "CSRF_COOKIE_SECURE": False,
                "SECURE_HSTS_SECONDS": 0,
                "SECURE_PROXY_SSL_HEADER": None,
                "SECURE_SSL_REDIRECT": False,
                "hsts_header": None,
                "csrf_cookie_secure": False,
                "plain_http": 204,
            },
        ),
        (
            "false",
            {
                "SESSION_COOKIE_SECURE": False,
                "SECURE_HSTS_SECONDS": 0,
                "SECURE_PROXY_SSL_HEADER": None,
                "hsts_header": None,
                "plain_http": 204,
            },
        ),
        (
            "true",
            {
                "SESSION_COOKIE_SECURE": True,
                "CSRF_COOKIE_SECURE": True,
                "SECURE_HSTS_SECONDS": ONE_YEAR,
                "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
                "SECURE_SSL_REDIRECT": True,
                "hsts_header": f"max-age={ONE_YEAR}",
                "csrf_cookie_secure": True,
                "plain_http": 301,
            },
        ),
    ],
)
def test_trinity_https_sets_secure_cookies_hsts_and_the_proxy_header(
    tmp_path: Path, https: str | None, expected: dict[str, object]
) -> None:
    overrides = {"ALLOWED_HOSTS": "testserver"}
    if https is not None:
        overrides["TRINITY_HTTPS"] = https
    result = _run(tmp_path, HTTPS_PROBE, **overrides)
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout.strip().splitlines()[-1])
    for name, value in expected.items():
        assert values[name] == value, name
    assert values["plain_healthz"] != 301  # the health check is never redirected


def test_trinity_https_rejects_a_value_that_is_not_a_boolean(tmp_path: Path) -> None:
    result = _boot(tmp_path, TRINITY_HTTPS="sometimes")
    assert result.returncode != 0
    assert "TRINITY_HTTPS" in result.stderr


@pytest.mark.parametrize(
    ("value", "debug"),
    [
        ("change-me-to-a-long-random-string", None),  # deploy/trinity.env.example's
        ("", None),
        ("short-but-not-empty", "false"),
        ("a" * 60, None),  # long, one character
    ],
)
def test_a_placeholder_empty_or_weak_secret_key_is_refused_at_startup(
    tmp_path: Path, value: str, debug: str | None
) -> None:
    overrides = {"SECRET_KEY": value}
    if debug is not None:
        overrides["DEBUG"] = debug
    result = _manage_check(tmp_path, **overrides)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr
    if value:
        assert value not in result.stderr  # a key is a secret even when weak


def test_the_example_env_files_secret_key_is_the_refused_placeholder() -> None:
    example = (ROOT / "deploy" / "trinity.env.example").read_text()
    line = next(x for x in example.splitlines() if x.startswith("SECRET_KEY="))
    from trinity.settings import PLACEHOLDER_SECRET_KEYS

    assert line.removeprefix("SECRET_KEY=") in PLACEHOLDER_SECRET_KEYS


def test_a_long_random_secret_key_or_debug_is_accepted(tmp_path: Path) -> None:
    assert _manage_check(tmp_path, SECRET_KEY=secrets.token_urlsafe(50)).returncode == 0
    placeholder_in_dev = _manage_check(
        tmp_path, SECRET_KEY="change-me-to-a-long-random-string", DEBUG="true"
    )
    assert placeholder_in_dev.returncode == 0, placeholder_in_dev.stderr


@pytest.mark.parametrize("value", ["10.0.0.0/8,not-a-network", "300.1.1.1"])
def test_a_bad_trusted_proxy_fails_loudly_naming_the_variable(tmp_path: Path, value: str) -> None:
    result = _boot(tmp_path, TRINITY_TRUSTED_PROXIES=value)
    assert result.returncode != 0
    assert "TRINITY_TRUSTED_PROXIES" in result.stderr


def test_trusted_proxies_are_read_as_networks(tmp_path: Path) -> None:
    probe = (
        "import django; django.setup(); from django.conf import settings; "
        "print([str(n) for n in settings.TRINITY_TRUSTED_PROXIES])"
    )
    result = _run(tmp_path, probe, TRINITY_TRUSTED_PROXIES="10.0.0.5, 172.16.0.0/12,fd00::/8")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['10.0.0.5/32', '172.16.0.0/12', 'fd00::/8']"


def test_unset_the_metrics_token_is_generated_once_into_var_0600(tmp_path: Path) -> None:
    code = SETUP + "; print(settings.TRINITY_METRICS_TOKEN)"
    first = _run(tmp_path, code)
    assert first.returncode == 0, first.stderr
    token_file = tmp_path / "metrics_token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert len(token) >= 32 and first.stdout.split()[-1] == token
    assert _run(tmp_path, code).stdout.split()[-1] == token  # every process reads the same


@pytest.mark.parametrize("value", ["", "   ", "short-token", "has a space in it ok"])
def test_an_empty_short_or_spaced_metrics_token_is_refused_unechoed(
    tmp_path: Path, value: str
) -> None:
    result = _boot(tmp_path, TRINITY_METRICS_TOKEN=value)
    assert result.returncode != 0
    assert "TRINITY_METRICS_TOKEN" in result.stderr
    if value.strip():
        assert value not in result.stderr
    assert not (tmp_path / "metrics_token").exists()


def test_a_set_metrics_token_is_used_and_nothing_is_generated(tmp_path: Path) -> None:
    token = secrets.token_urlsafe(24)
    result = _run(
        tmp_path, SETUP + "; print(settings.TRINITY_METRICS_TOKEN)", TRINITY_METRICS_TOKEN=token
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == token
    assert not (tmp_path / "metrics_token").exists()


@pytest.mark.parametrize(("trusted", "warned"), [("", True), ("10.0.0.0/8", False)])
def test_a_web_process_behind_tls_without_trusted_proxies_warns_at_startup(
    tmp_path: Path, trusted: str, warned: bool
) -> None:
    result = _run(
        tmp_path,
        "import trinity.wsgi",
        TRINITY_HTTPS="true",
        TRINITY_TRUSTED_PROXIES=trusted,
        SECRET_KEY=secrets.token_urlsafe(50),
    )
    assert result.returncode == 0, result.stderr
    assert ("TRINITY_TRUSTED_PROXIES is unset" in result.stderr) == warned, result.stderr


SECRETS_PROBE = (
    "import json; "
    + SETUP
    + (
        "; print(json.dumps([settings.SECRET_KEY, settings.TRINITY_ENCRYPTION_KEYS, "
        "settings.TRINITY_METRICS_TOKEN, settings.DATABASES['default']['PASSWORD'], "
        "settings.REDIS_URL]))"
    )
)


def test_each_secret_is_read_from_the_file_its_file_variable_names(tmp_path: Path) -> None:
    """What a swarm secret looks like: a file under /run/secrets, often with a newline."""
    values = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "TRINITY_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "TRINITY_METRICS_TOKEN": secrets.token_urlsafe(24),
        "DATABASE_URL": "postgres://trinity:pg-from-file@postgres:5432/trinity",
        "REDIS_URL": "redis://:redis-from-file@redis:6379/0",
    }
    assert set(values) == set(SECRET_NAMES)
    files: dict[str, str] = {}
    for name, value in values.items():
        (tmp_path / name).write_text(value + "\n")
        files[f"{name}_FILE"] = str(tmp_path / name)
    result = _run(tmp_path, SECRETS_PROBE, **files)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == [
        values["SECRET_KEY"],
        [values["TRINITY_ENCRYPTION_KEYS"]],
        values["TRINITY_METRICS_TOKEN"],
        "pg-from-file",
        values["REDIS_URL"],
    ]
    # Read, not generated: var/ holds none of them.
    assert not {"secret_key", "encryption.key", "metrics_token"} & {
        p.name for p in tmp_path.iterdir()
    }


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_a_secret_set_both_ways_stops_startup_naming_both_and_echoing_neither(
    tmp_path: Path, name: str
) -> None:
    value = "postgres://u:in-the-environment@h/db" if name == "DATABASE_URL" else "in-the-env-xyz"
    (tmp_path / "secret").write_text("in-the-file-xyz")
    result = _boot(tmp_path, **{name: value, f"{name}_FILE": str(tmp_path / "secret")})
    assert result.returncode != 0
    assert f"{name} and {name}_FILE are both set" in result.stderr
    assert "in-the-env" not in result.stderr and "in-the-file" not in result.stderr


def test_a_secret_file_that_cannot_be_read_stops_startup_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-secret"
    result = _boot(tmp_path, SECRET_KEY_FILE=str(missing))
    assert result.returncode != 0
    assert f"SECRET_KEY_FILE={missing}: cannot read it" in result.stderr


def test_a_weak_secret_key_from_a_file_is_refused_like_one_from_the_environment(
    tmp_path: Path,
) -> None:
    (tmp_path / "key").write_text("change-me-to-a-long-random-string\n")
    result = _manage_check(tmp_path, SECRET_KEY_FILE=str(tmp_path / "key"))
    assert result.returncode != 0
    assert "SECRET_KEY is the example's placeholder" in result.stderr
