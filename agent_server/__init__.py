"""The per-agent server: runs one turn per request with a per-spawn environment.

This package imports nothing from the Django side (trinity, agents, subscriptions,
execution). The two sides share only the JSON contract in `agent_server.contract`
and the standard-library-only `trinity_contract` package (error codes, refusal-text
patterns, the health proof), which both import.
"""

from __future__ import annotations
