"""Runtimes behind one interface: the Claude Code CLI and the direct Messages API."""

from __future__ import annotations

from agent_server.runtimes.base import Runtime, Turn, TurnOutcome

__all__ = ["Runtime", "Turn", "TurnOutcome"]
