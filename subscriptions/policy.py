"""The routing policy's gates: which credentials an agent's policy lets a turn use,
and when a chat session stays on the credential that served its previous turn.

Pure: no Django, no I/O. The policy values are ``trinity.models.RoutingPolicy``'s
(spelled here so this module imports no models; a test pins that they agree):

- ``thrifty``: plans first, the platform key as the last rung. Fails open: a plan
  without a usable reading is still tried before the key.
- ``subscription-only``: fails closed. Only plans whose overage is a documented hard
  stop (``billing.hard_stop``), the assigned one included; never the key.
- ``pinned``: never leaves its assignment (the walk stops at ``Stop.PINNED``).

The tables are ``tests/subscriptions/test_policies.py``.
"""

from __future__ import annotations

from subscriptions.billing import PlanEntry, hard_stop

THRIFTY = "thrifty"
SUBSCRIPTION_ONLY = "subscription-only"
PINNED = "pinned"


def key_allowed(policy: str) -> bool:
    """Whether the policy lets a turn (or the agent's boot) bill the platform key.

    Only ``subscription-only`` forbids it; the key's own switches are checked beside
    this (``lifecycle.platform_key_allowed``).
    """
    return policy != SUBSCRIPTION_ONLY


def only_hard_stop(policy: str) -> bool:
    """Whether the policy admits only plans that refuse past their quota."""
    return policy == SUBSCRIPTION_ONLY


def plan_allowed(policy: str, entry: PlanEntry) -> bool:
    """Whether a turn of an agent with ``policy`` may run on a plan of ``entry``'s type.

    Under ``subscription-only`` a plan that bills overage, or whose type is uncurated
    (``unknown``), could bill past its quota without saying so: it is not allowed,
    even when it is the agent's own assignment.
    """
    return not only_hard_stop(policy) or hard_stop(entry)


def affinity_target(
    *,
    policy: str,
    auto_switch: bool,
    assigned_id: int | None,
    previous_kind: str,
    previous_subscription_id: int | None,
) -> int | None:
    """The subscription a chat turn should stay on because it served the session's
    previous turn, or None when the turn starts on its assignment as usual.

    Only a plan other than the assignment (on the assignment nothing needs doing); the
    caller still checks that plan is eligible (the policy allows its type and it is
    not known to refuse: ``pool.affinity_rung``). The platform key is never sticky:
    under thrifty plans come first, and a session that once fell to the key must come
    back to a plan. A pinned agent, or one with auto-switch off, never leaves its
    assignment; an agent without an assignment has no walk to fall back on if the
    sticky plan refuses.
    """
    if policy == PINNED or not auto_switch or assigned_id is None:
        return None
    if previous_kind != "subscription" or previous_subscription_id is None:
        return None
    if previous_subscription_id == assigned_id:
        return None
    return previous_subscription_id
