"""Whether a process in a container reaches a host and port: the container tests'
probe, run inside the container as a given user (docker exec), one connect a target."""

from __future__ import annotations

from typing import Any

# Connects to each host:port argument once; prints "open" or the connect's error class
# (ConnectionRefusedError: a REJECT rule or nothing listening; TimeoutError: dropped).
PROBE = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, int(port)))
        print("open")
    except OSError as exc:
        print(type(exc).__name__)
    finally:
        s.close()
"""
REFUSED = "ConnectionRefusedError"


def reach(container: Any, user: str, targets: list[str]) -> list[str]:
    """For each ``host:port`` of ``targets``, "open" or why a connect as ``user`` in
    ``container`` failed."""
    code, output = container.exec_run(["python3", "-c", PROBE, *targets], user=user)
    lines = output.decode().splitlines()
    assert code == 0 and len(lines) == len(targets), lines
    return lines
