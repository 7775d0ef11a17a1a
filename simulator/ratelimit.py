"""The ``anthropic-ratelimit-unified-*`` headers an OAuth (plan) credential carries.

Names and value shapes follow what the real API sends to Claude Code: utilizations
as fractions ("0.42", above 1 once a window is overdrawn), resets as unix seconds,
statuses ``allowed`` / ``allowed_warning`` / ``rejected``, and a representative claim
naming the window that binds (``five_hour``, ``seven_day``, ``seven_day_sonnet``...).
"""

from __future__ import annotations

import math

from simulator.state import HEADER_SUFFIX, WARNING_THRESHOLD, Window, WindowStatus

PREFIX = "anthropic-ratelimit-unified-"


def _fraction(value: float) -> str:
    return repr(round(value, 4))


def representative(windows: list[Window], *, served: bool, now: float) -> Window:
    """The window that binds: when refused, the exhausted one that resets last
    (nothing serves before it resets); otherwise the most used one, earlier
    windows winning ties."""
    rejected = [w for w in windows if w.status(served=served) == "rejected"]
    if rejected:
        return max(rejected, key=lambda w: w.reset_unix(now))
    return max(windows, key=lambda w: w.utilization)


def overall_status(windows: list[Window], *, served: bool) -> WindowStatus:
    statuses = {w.status(served=served) for w in windows}
    if "rejected" in statuses:
        return "rejected"
    if "allowed_warning" in statuses:
        return "allowed_warning"
    return "allowed"


def unified_headers(
    windows: list[Window], *, served: bool, now: float, jitter: int = 0
) -> dict[str, str]:
    """The unified header set for a response on these windows.

    ``served`` says whether this request was served; a served request never reports
    ``rejected``. On a refusal ``retry-after`` points at the binding reset. ``jitter``
    seconds shift every reported reset (a provider's jitter between answers).
    """
    claim = representative(windows, served=served, now=now)
    status = overall_status(windows, served=served)
    headers = {
        PREFIX + "status": status,
        PREFIX + "representative-claim": claim.name,
        PREFIX + "reset": str(claim.reset_unix(now) + jitter),
        PREFIX + "fallback-percentage": "0.5",
        PREFIX + "overage-status": "rejected",
        PREFIX + "overage-disabled-reason": "org_level_disabled",
    }
    for window in windows:
        suffix = HEADER_SUFFIX[window.name]
        headers[f"{PREFIX}{suffix}-utilization"] = _fraction(window.utilization)
        headers[f"{PREFIX}{suffix}-reset"] = str(window.reset_unix(now) + jitter)
        headers[f"{PREFIX}{suffix}-status"] = window.status(served=served)
        if window.exhausted:
            headers[f"{PREFIX}{suffix}-surpassed-threshold"] = "1.0"
        elif window.utilization >= WARNING_THRESHOLD:
            headers[f"{PREFIX}{suffix}-surpassed-threshold"] = repr(WARNING_THRESHOLD)
    if status == "rejected":
        headers["retry-after"] = str(max(1, math.ceil(claim.reset_unix(now) - now)))
    return headers
