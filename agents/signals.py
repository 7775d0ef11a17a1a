"""Signals the agents app sends; other apps listen without agents importing them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent inside agent_create's transaction, before the agent boots, with ``agent`` and
# ``auto_assign``. subscriptions listens to give the agent the best-ranked plan.
agent_created = Signal()
