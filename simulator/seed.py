"""Credentials to load at boot (``python -m simulator --seed FILE``).

The file is a JSON list; each entry is the control API's register body plus an
optional ``usage`` map of window name to percent used, e.g.
``[{"token": "sk-ant-oat01-...", "kind": "oauth", "label": "demo-pro",
"usage": {"five_hour": 97}}]``. A ``codex`` entry may carry its ChatGPT sign-in
(``account_id``, ``refresh_token``, ``expires_in``, ``email``, ``user_id``). `make run`'s
demo writes one (mode 0600).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulator.state import SignIn, Simulator

_REGISTER_FIELDS = ("label", "capacity", "credit_usd", "usage_scope", "plan_type")
_SIGN_IN_FIELDS = ("account_id", "refresh_token", "expires_in", "email", "user_id")


def load_seed(sim: Simulator, path: Path) -> int:
    """Register every entry of ``path`` into ``sim``; returns how many.

    Raises ValueError naming the entry when one is malformed.
    """
    entries: Any = json.loads(path.read_text())
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a JSON list of credentials")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or "token" not in entry or "kind" not in entry:
            raise ValueError(f"{path}: entry {index} needs 'token' and 'kind'")
        sign_in = {name: entry[name] for name in _SIGN_IN_FIELDS if name in entry}
        sim.register(
            token=entry["token"],
            kind=entry["kind"],
            sign_in=SignIn(**sign_in) if sign_in else None,
            **{name: entry[name] for name in _REGISTER_FIELDS if name in entry},
        )
        for window, percent in (entry.get("usage") or {}).items():
            sim.set_usage(entry["token"], window, percent=float(percent), tokens=None)
    return len(entries)
