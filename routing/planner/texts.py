"""The words a planned turn ends with (the operator reads them in the turn's detail)."""

from __future__ import annotations


def outage_detail(provider: str, *, sent: bool) -> str:
    """The failed turn's detail when the provider's breaker is open: ``sent`` when it met
    the outage itself (then it is not retried or walked), else it failed fast unsent."""
    what = (
        "the turn met it and is not retried on any credential" if sent else "the turn was not sent"
    )
    return (
        f"provider outage: {provider}'s circuit breaker is open after repeated provider "
        f"errors (5xx, timeouts) across its credentials; {what}. Retry shortly."
    )


def at_capacity_detail(name: str) -> str:
    return (
        f"{name} is serving its concurrency cap and no other credential this agent may "
        "use is free; the turn was not sent. Retry shortly."
    )


POLICY_NO_KEY = " Its routing policy (subscription-only) never uses the platform API key."
NOT_SENT_IN_TIME = "the turn's time budget ran out before it could be sent"
