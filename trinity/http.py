"""One pooled HTTP client per process, for each outside counterpart that needs one.

A client built per request pays for a connection pool (and a TLS context) every time;
one shared across a fork would share its sockets with the parent. So each process
builds its own on first use, and a forked child (a Celery or gunicorn worker) builds
its own again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import httpx


class ProcessClient:
    """``get()`` answers this process's client, built by ``factory`` on first use."""

    def __init__(self, factory: Callable[[], httpx.Client]) -> None:
        self._factory = factory
        self._built: tuple[int, httpx.Client] | None = None
        self._lock = threading.Lock()

    def get(self) -> httpx.Client:
        built = self._built
        pid = os.getpid()
        if built is not None and built[0] == pid:
            return built[1]
        with self._lock:
            if self._built is None or self._built[0] != pid:
                self._built = (pid, self._factory())
            return self._built[1]
