"""Decide which backing services `make test` runs on, and print shell exports.

In CI (CI=true) the suite must run on real Postgres and Redis: if either cannot be
reached this exits non-zero, so the run fails instead of skipping. Outside CI it
uses them when reachable and falls back to the embedded defaults otherwise; it
always says which on stderr. Explicit DATABASE_URL / REDIS_URL are respected.
"""

from __future__ import annotations

import os
import socket
import sys

PG = ("127.0.0.1", 5432, "postgres://root@127.0.0.1:5432/test")
REDIS = ("127.0.0.1", 6379, "redis://127.0.0.1:6379/1")


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def main() -> int:
    in_ci = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
    exports: dict[str, str] = {}
    chosen: list[str] = []
    for name, (host, port, url), env_name in (
        ("Postgres", PG, "DATABASE_URL"),
        ("Redis", REDIS, "REDIS_URL"),
    ):
        if os.environ.get(env_name):
            chosen.append(f"{name} from {env_name}")
            continue
        if reachable(host, port):
            exports[env_name] = url
            chosen.append(f"{name} at {host}:{port}")
        elif in_ci:
            print(
                f"CI: {name} is not reachable at {host}:{port}; refusing to fall back",
                file=sys.stderr,
            )
            return 1
        else:
            chosen.append(f"embedded default instead of {name} (not reachable at {host}:{port})")
    print("make test runs on: " + "; ".join(chosen), file=sys.stderr)
    for key, value in exports.items():
        print(f"export {key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
