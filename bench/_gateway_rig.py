"""The processes ``bench/gateway.py`` measures, and what each one needs seeded.

- the provider simulator, with a Claude plan token and a Codex plan sign-in whose
  windows cannot run out during a run;
- a plain TCP splice relay in front of it (``bench/_splice.py``, a process of its own);
- the gateway (``python -m gateway``) on a throwaway Postgres database and an empty Redis
  database, with both plans registered as subscriptions and one gateway key;
- LiteLLM's proxy from a bench-only venv (``.venv-bench-litellm``, made on first use,
  beside the project's ``.venv``: not under ``var/``, which the red-team test reads
  whole), its config generated: the simulator as an Anthropic upstream, a master key,
  no database.

Each process is started by a context manager that stops it (SIGTERM, then SIGKILL of
its process group) on the way out, whatever happened.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._setup import free_port  # noqa: E402
from simulator.process import ListeningProcess, SimulatorProcess  # noqa: E402

MODEL = "claude-sonnet-5-5"
CODEX_MODEL = "gpt-5.5-codex"
CODEX_ACCOUNT = "acct-bench-gateway"
# Tokens per window: thousands of 50 KB requests (about 12,000 tokens each) never
# exhaust a plan, so no path ever meets a refusal.
UNLIMITED = 10**13
CLAUDE_WINDOWS = ("five_hour", "seven_day", "seven_day_sonnet", "seven_day_opus")
CODEX_WINDOWS = ("five_hour", "seven_day")
# The LiteLLM release the figures were taken with (what `pip install 'litellm[proxy]'`
# resolved to); pinned so a rerun measures the same proxy.
LITELLM_VERSION = "1.108.7"
LITELLM_VENV = ROOT / ".venv-bench-litellm"


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and every live descendant so far."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    total, frontier = 0, [pid]
    while frontier:
        current = frontier.pop()
        total += ticks.get(current, 0)
        frontier.extend(child for child, parent in parents.items() if parent == current)
    return total / os.sysconf("SC_CLK_TCK")


class HealthCheckedProcess:
    """A server child process that is ready once ``health_url`` answers 200.

    Started in a session of its own (``stop`` signals the whole group), its output
    into ``log_path``. ``start`` raises RuntimeError naming the log when the child
    exits or does not answer within ``timeout`` seconds.
    """

    def __init__(
        self,
        *,
        name: str,
        argv: list[str],
        env: dict[str, str],
        port: int,
        health_path: str,
        log_path: Path,
        timeout: float = 60.0,
    ) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.base_url = f"http://127.0.0.1:{port}"
        self.health_url = self.base_url + health_path
        self.log_path = log_path
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> HealthCheckedProcess:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - argv built here
                self.argv,
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._await_health()
        except BaseException:
            self.stop()
            raise
        return self

    def _await_health(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited ({self.proc.returncode}) at startup; see {self.log_path}"
                )
            with suppress(httpx.HTTPError):
                if httpx.get(self.health_url, timeout=1.0).status_code == 200:
                    return
            time.sleep(0.1)  # a retry pause while the server starts
        raise RuntimeError(
            f"{self.name} did not answer {self.health_url} in time; see {self.log_path}"
        )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        # Anything the server left behind in its group goes too.
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def __enter__(self) -> HealthCheckedProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SpliceProcess(ListeningProcess):
    """``bench/_splice.py`` relaying to ``target`` (a base URL)."""

    banner = "splice"

    def __init__(self, *, target: str, log_path: Path) -> None:
        super().__init__(startup_timeout=20.0, stop_timeout=5.0, log_path=log_path)
        self.target = target.removeprefix("http://")

    def command(self) -> list[str]:
        return [sys.executable, str(ROOT / "bench" / "_splice.py"), "--target", self.target]


# the simulator's credentials


@dataclass(frozen=True)
class Plans:
    """The two plans every path spends: the Claude token, the Codex sign-in."""

    claude_token: str = field(repr=False)
    codex_access: str = field(repr=False)
    codex_refresh: str = field(repr=False)
    openai_key: str = field(repr=False)
    codex_account: str = CODEX_ACCOUNT

    def codex_auth_json(self) -> str:
        """The Codex plan as `codex login` writes auth.json (what a plan registers from)."""
        tokens = {
            "access_token": self.codex_access,
            "refresh_token": self.codex_refresh,
            "account_id": self.codex_account,
        }
        return json.dumps({"OPENAI_API_KEY": None, "tokens": tokens})


def _unsigned_jwt(claims: dict[str, Any]) -> str:
    """A JWT without a signature (the platform reads a Codex token's claims only)."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.{secrets.token_urlsafe(16)}"


def plans_seed(sim: SimulatorProcess) -> Plans:
    """Register both plans in ``sim`` with windows no run can fill."""
    from trinity_contract.codex import AUTH_CLAIMS

    claims = {
        # Far from expiry: the platform must not refresh it during a run.
        "exp": int(time.time()) + 30 * 86400,
        AUTH_CLAIMS: {"chatgpt_account_id": CODEX_ACCOUNT, "chatgpt_plan_type": "pro"},
    }
    plans = Plans(
        claude_token=f"sk-ant-oat01-bench-gw-{secrets.token_urlsafe(24)}",
        codex_access=_unsigned_jwt(claims),
        codex_refresh="rt-bench-" + secrets.token_urlsafe(24),
        openai_key=f"sk-proj-bench-{secrets.token_urlsafe(24)}",
    )
    sim.control.register(
        plans.claude_token,
        kind="oauth",
        label="bench-claude",
        plan_type="max-20x",
        capacity=dict.fromkeys(CLAUDE_WINDOWS, UNLIMITED),
    )
    sim.control.register(
        plans.codex_access,
        kind="codex",
        label="bench-codex",
        plan_type="pro",
        account_id=CODEX_ACCOUNT,
        refresh_token=plans.codex_refresh,
        capacity=dict.fromkeys(CODEX_WINDOWS, UNLIMITED),
    )
    # Direct's non-streamed Responses requests: the ChatGPT backend only streams.
    sim.control.register(plans.openai_key, kind="openai_key", label="bench-openai", credit_usd=1e9)
    return plans


# the gateway


def gateway_seed(plans: Plans) -> str:
    """The platform's side (Django is booted on the throwaway database): both plans as
    subscriptions with fresh serving readings, an owner and a gateway key; returns the
    key."""
    from django.contrib.auth.models import User

    from bench._setup import _serving_readings
    from gateway.keys import gateway_key_create
    from subscriptions.services import subscription_register

    claude, _ = subscription_register(
        name="bench-claude", provider="anthropic", plan_type="max-20x", token=plans.claude_token
    )
    codex, _ = subscription_register(
        name="bench-codex", provider="openai-codex", plan_type="pro", token=plans.codex_auth_json()
    )
    now = datetime.now(tz=UTC)
    # Fresh readings that say both serve: the request path never waits on a probe.
    _serving_readings([claude, codex], now=now)
    owner = User.objects.create(username="bench-gateway-owner", is_staff=True)
    return gateway_key_create(owner=owner, created_by=owner, name="bench", now=now).key


def gateway_missing() -> str | None:
    """Why this checkout cannot start the gateway process, or None when it can."""
    for part in ("gateway/__main__.py", "gateway/server"):
        if not (ROOT / part).exists():
            return f"this checkout has no {part}: the gateway process has not landed here yet"
    return None


def gateway_process(
    *, sim_url: str, environ: dict[str, str], log_path: Path, profile: Path | None = None
) -> HealthCheckedProcess:
    """The gateway (``python -m gateway``) with the benchmark's database, Redis and
    TRINITY_VAR_DIR (``environ``), every upstream the simulator; under cProfile writing
    to ``profile`` when given (at its clean exit: SIGTERM)."""
    port = free_port()
    env = {
        **environ,
        "DJANGO_SETTINGS_MODULE": "trinity.settings",
        "TRINITY_ANTHROPIC_BASE_URL": sim_url,
        "TRINITY_CODEX_BASE_URL": sim_url,
        "TRINITY_OPENAI_BASE_URL": sim_url,
        "TRINITY_CODEX_AUTH_URL": sim_url,
        "PYTHONUNBUFFERED": "1",
    }
    profiled = [str(ROOT / "bench" / "_profiled.py"), str(profile)] if profile else ["-m"]
    argv = [sys.executable, *profiled, "gateway", "--host", "127.0.0.1", "--port", str(port)]
    return HealthCheckedProcess(
        name="gateway", argv=argv, env=env, port=port, health_path="/healthz", log_path=log_path
    )


# LiteLLM


def litellm_binary() -> Path:
    """``litellm`` from the bench-only venv, installing it there on first use."""
    binary = LITELLM_VENV / "bin" / "litellm"
    if binary.exists():
        return binary
    python3 = shutil.which("python3") or sys.executable
    print(f"installing litellm[proxy]=={LITELLM_VERSION} into {LITELLM_VENV} (once)", flush=True)
    subprocess.run([python3, "-m", "venv", str(LITELLM_VENV)], check=True)  # noqa: S603
    pip = [str(LITELLM_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, f"litellm[proxy]=={LITELLM_VERSION}"], check=True)  # noqa: S603
    return binary


def litellm_process(
    *, sim_url: str, upstream_key: str, master_key: str, workdir: Path
) -> HealthCheckedProcess:
    """LiteLLM's proxy with a generated config: model ``MODEL`` served by the simulator
    as an Anthropic upstream on ``upstream_key``, ``master_key``, no database."""
    config = {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {
                    "model": f"anthropic/{MODEL}",
                    "api_base": sim_url,
                    "api_key": upstream_key,
                },
            }
        ],
        "general_settings": {"master_key": master_key},
    }
    config_path = workdir / "litellm.yaml"
    # JSON is YAML: no YAML writer needed.
    config_path.write_text(json.dumps(config, indent=2))
    config_path.chmod(0o600)
    home = workdir / "litellm-home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        # Its model price map from the package, not fetched from the internet at start.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    port = free_port()
    argv = [
        str(litellm_binary()),
        *("--config", str(config_path), "--host", "127.0.0.1", "--port", str(port)),
    ]
    return HealthCheckedProcess(
        name="litellm",
        argv=argv,
        env=env,
        port=port,
        health_path="/health/liveliness",
        log_path=workdir / "litellm.log",
        timeout=120.0,
    )
