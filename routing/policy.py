"""The one owner of the routing policy: typed verdicts on which credentials an
agent's turns may use, and when a chat session stays on the credential that served
its previous turn. Every caller asks these; nothing else reads ``routing_policy``
to decide.

- ``leave_verdict``: may the agent's turns leave its assignment, and why not
  (auto-switch off, pinned);
- ``plan_verdict``: may a turn start (or run) on this plan, and why not (a
  subscription-only agent on no plan, or on one that is no hard stop);
- ``key_verdict``: may the agent reach the platform key, and why not.

Each has an ``agent_*`` form that reads the rows already in memory (no query).

Pure: no Django, no I/O. The policy values are ``trinity.models.RoutingPolicy``'s
(spelled here so this module imports no models; a test pins that they agree):

- ``thrifty``: plans first, the platform key as the last rung. Fails open: a plan
  without a usable reading is still tried before the key (one refusal is cheaper
  than billing the key on missing telemetry).
- ``subscription-only``: fails closed. Only plans whose overage is a documented hard
  stop (``billing.hard_stop``), the assigned one included; never the key.
- ``pinned``: never leaves its assignment (the walk stops at ``Stop.PINNED``).

The key verdict is a ceiling: the admin's system-wide fallback switch bounds every
agent, and an agent's own flag and budgets can only narrow what the fleet allows,
never widen it.

The tables are ``tests/subscriptions/test_policies.py`` and
``tests/subscriptions/test_key_ceiling.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import NamedTuple, Protocol

from routing import billing
from routing.providers import platform_key_configured

# What the ``agent_*`` forms read of the rows the caller holds (``subscriptions.models.
# Subscription``, ``agents.models.Agent``, ``trinity.models.SystemSettings``): only
# attributes already in memory, so no verdict runs a query.


class PlanRow(Protocol):
    """A plan subscription's row, as the policy reads it."""

    @property
    def provider(self) -> str: ...

    @property
    def plan_type(self) -> str: ...

    @property
    def billing_class(self) -> str: ...

    @property
    def overage(self) -> str: ...


class AgentRow(Protocol):
    """An agent's row, as the policy reads it."""

    @property
    def routing_policy(self) -> str: ...

    @property
    def use_platform_api_key(self) -> bool | None: ...

    @property
    def runtime(self) -> str: ...

    @property
    def provider(self) -> str: ...

    @property
    def subscription(self) -> PlanRow | None: ...


class SystemRow(Protocol):
    """The system settings' row, as the policy reads it (its keys: ``providers``)."""

    @property
    def subscription_api_key_fallback(self) -> bool: ...

    @property
    def auto_switch_subscriptions(self) -> bool: ...


THRIFTY = "thrifty"
SUBSCRIPTION_ONLY = "subscription-only"
PINNED = "pinned"


# The runtimes that can run on their provider's platform key (``agents.models.Runtime``'s
# values, every one of them today: the Claude runtimes on the Anthropic key, the Codex
# CLI on the OpenAI key; a test pins that they agree).
KEY_RUNTIMES = frozenset({"claude-code", "anthropic-api", "codex-cli"})


def key_allowed(policy: str) -> bool:
    """Whether the routing policy alone lets a turn (or the agent's boot) bill the
    platform key. Only ``subscription-only`` forbids it; the whole verdict, with the
    admin's switch and the agent's flag, is ``key_verdict``.
    """
    return policy != SUBSCRIPTION_ONLY


class KeyRefusal(StrEnum):
    """Why an agent may not reach the platform key at all (``key_verdict``), in the
    order the verdict checks them: the admin's ceiling first."""

    # The admin turned the system-wide fallback off: no agent reaches the key.
    FALLBACK_OFF = "fallback_off"
    NO_KEY = "no_key"
    # A subscription-only agent never bills the key.
    POLICY = "policy"
    AGENT_OPTED_OUT = "agent_opted_out"
    NOT_A_CLAUDE_RUNTIME = "not_a_claude_runtime"


@dataclass(frozen=True, slots=True)
class KeyVerdict:
    """May this agent reach the platform key (as a rung or as what it boots with), and
    if not, the first reason why not."""

    refusal: KeyRefusal | None = None

    @property
    def allowed(self) -> bool:
        return self.refusal is None


def key_verdict(
    *,
    fallback_on: bool,
    key_configured: bool,
    routing_policy: str,
    agent_flag: bool | None,
    runtime: str,
) -> KeyVerdict:
    """Whether an agent may reach the platform key, and the first reason why not.

    The admin's system-wide fallback is a ceiling: off, no agent reaches the key,
    whatever its own flag says. The agent's ``use_platform_api_key`` only narrows:
    False is "never bill the key"; None (and True, which cannot widen anything)
    follow the system. Then the routing policy (subscription-only never bills the
    key) and whether the runtime can use a key at all.
    """
    if not fallback_on:
        return KeyVerdict(KeyRefusal.FALLBACK_OFF)
    if not key_configured:
        return KeyVerdict(KeyRefusal.NO_KEY)
    if not key_allowed(routing_policy):
        return KeyVerdict(KeyRefusal.POLICY)
    if agent_flag is False:
        return KeyVerdict(KeyRefusal.AGENT_OPTED_OUT)
    if runtime not in KEY_RUNTIMES:
        return KeyVerdict(KeyRefusal.NOT_A_CLAUDE_RUNTIME)
    return KeyVerdict()


def agent_key_verdict(agent: AgentRow, system: SystemRow) -> KeyVerdict:
    """``key_verdict`` for ``agent`` under ``system`` (both already in memory: no query).

    The key is the one of the agent's provider (``Agent.provider``,
    ``platform_keys.platform_key``): a Claude agent's key is configured when the
    Anthropic key is, a Codex agent's when the OpenAI key is; neither ever counts for
    the other. Every caller asks this: the turn's baseline and key rung, the walk's key
    gate, the routing explainer, the agent's boot credential and the API's effective
    value.
    """
    return key_verdict(
        fallback_on=system.subscription_api_key_fallback,
        key_configured=platform_key_configured(system, agent.provider),
        routing_policy=agent.routing_policy,
        agent_flag=agent.use_platform_api_key,
        runtime=agent.runtime,
    )


def tightest_budget(caps: Iterable[Decimal | None]) -> Decimal | None:
    """The tightest of ``caps`` (None: no cap), or None when none caps anything.

    An agent's key budget per period is the tighter of what its owner set and what
    the admin set for it (``Agent.key_budget_*`` and ``Agent.admin_key_budget_*``): the
    owner can lower the admin's cap, never raise or clear it.
    """
    present = [cap for cap in caps if cap is not None]
    return min(present) if present else None


# The agent fields only an admin may write: the admin's caps on the agent's key budget.
ADMIN_AGENT_FIELDS = frozenset({"admin_key_budget_daily_usd", "admin_key_budget_monthly_usd"})


def agent_fields_refused(*, fields: Iterable[str], is_admin: bool) -> list[str]:
    """The fields of an agent write its author may not make: the admin's caps, unless
    the author is an admin (sorted; empty when the write is allowed)."""
    return [] if is_admin else sorted(set(fields) & ADMIN_AGENT_FIELDS)


class LeaveRefusal(StrEnum):
    """Why an agent's turns may not leave its assignment (``leave_verdict``), in the
    order the verdict checks them. The values are the walk's ``Stop`` values for the
    same ends (a test pins that they agree)."""

    # The admin's switch: no turn of any agent moves to another plan.
    AUTO_SWITCH_OFF = "auto_switch_off"
    # A pinned agent never leaves its assignment; a refusal fails the turn.
    PINNED = "pinned"


@dataclass(frozen=True, slots=True)
class LeaveVerdict:
    """May this agent's turns leave the plan they start on (walk, route around a
    refusing or forecast-out plan, stay on a session's plan, be rebalanced), and if
    not, the first reason why not."""

    refusal: LeaveRefusal | None = None

    @property
    def allowed(self) -> bool:
        return self.refusal is None


def leave_verdict(*, routing_policy: str, auto_switch: bool) -> LeaveVerdict:
    """Whether a turn under ``routing_policy`` may leave its assignment when the
    system's auto-switch is ``auto_switch``: the admin's switch first, then pinned."""
    if not auto_switch:
        return LeaveVerdict(LeaveRefusal.AUTO_SWITCH_OFF)
    if routing_policy == PINNED:
        return LeaveVerdict(LeaveRefusal.PINNED)
    return LeaveVerdict()


def agent_leave_verdict(agent: AgentRow, system: SystemRow) -> LeaveVerdict:
    """``leave_verdict`` for ``agent`` under ``system`` (both in memory: no query)."""
    return leave_verdict(
        routing_policy=agent.routing_policy, auto_switch=system.auto_switch_subscriptions
    )


def only_hard_stop(policy: str) -> bool:
    """Whether the policy admits only plans that refuse past their quota: whether
    ``plan_verdict`` can refuse a plan at all, so ``eligibility.admit`` reads a plan's
    terms only when it can (a test pins that the two agree)."""
    return policy == SUBSCRIPTION_ONLY


class PlanRefusal(StrEnum):
    """Why an agent's policy forbids a plan (``plan_verdict``)."""

    # Subscription-only with no plan at all: it would run on the key, or on nothing.
    NO_PLAN = "no_plan"
    # Subscription-only on a plan that bills overage, or whose type is uncurated, or
    # whose columns (copied at registration) say it bills.
    NOT_A_HARD_STOP = "not_a_hard_stop"


class PlanTerms(NamedTuple):
    """What the policy reads of a plan: its catalog entry and the billing columns
    registration copied onto its row."""

    entry: billing.PlanEntry
    billing_class: str
    overage: str


@dataclass(frozen=True, slots=True)
class PlanVerdict:
    """May a turn of this agent start (or run) on this plan, and if not, why not."""

    refusal: PlanRefusal | None = None

    @property
    def allowed(self) -> bool:
        return self.refusal is None


def plan_verdict(*, routing_policy: str, plan: PlanTerms | None) -> PlanVerdict:
    """Whether a turn under ``routing_policy`` may run on ``plan`` (None: no plan).

    ``thrifty`` and ``pinned`` allow any plan (pinned never leaves its own, whatever
    it is). Under ``subscription-only`` only a plan that refuses past its quota: the
    catalog decides (an uncurated type is ``unknown``, no hard stop), and the columns
    registration copied from it must agree; a plan that could bill past its quota
    without saying so is not allowed, even as the agent's own assignment.
    """
    if not only_hard_stop(routing_policy):
        return PlanVerdict()
    if plan is None:
        return PlanVerdict(PlanRefusal.NO_PLAN)
    columns = (plan.billing_class, plan.overage) == (billing.PLAN, billing.REFUSE)
    if not billing.hard_stop(plan.entry) or not columns:
        return PlanVerdict(PlanRefusal.NOT_A_HARD_STOP)
    return PlanVerdict()


def plan_terms(subscription: PlanRow) -> PlanTerms:
    """The terms ``plan_verdict`` reads of ``subscription`` (its row, in memory)."""
    return PlanTerms(
        billing.classify(subscription.provider, subscription.plan_type),
        subscription.billing_class,
        subscription.overage,
    )


def agent_plan_verdict(agent: AgentRow, subscription: PlanRow | None) -> PlanVerdict:
    """``plan_verdict`` for a turn of ``agent`` on ``subscription`` (None: no plan)."""
    terms = plan_terms(subscription) if subscription is not None else None
    return plan_verdict(routing_policy=agent.routing_policy, plan=terms)


def agent_start_verdict(agent: AgentRow) -> PlanVerdict:
    """May ``agent``'s turn start on its own assignment. Reads ``agent.subscription``
    only under a policy that restricts plans, so a thrifty or pinned agent's turn
    pays no query for it."""
    if not only_hard_stop(agent.routing_policy):
        return PlanVerdict()
    return agent_plan_verdict(agent, agent.subscription)


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
    not known to refuse: ``eligibility.admit`` in the session's role). The platform key
    is never sticky:
    under thrifty plans come first, and a session that once fell to the key must come
    back to a plan. A pinned agent, or one with auto-switch off, never leaves its
    assignment (``leave_verdict``); an agent without an assignment has no walk to fall
    back on if the sticky plan refuses.
    """
    leaves = leave_verdict(routing_policy=policy, auto_switch=auto_switch)
    if not leaves.allowed or assigned_id is None:
        return None
    if previous_kind != "subscription" or previous_subscription_id is None:
        return None
    if previous_subscription_id == assigned_id:
        return None
    return previous_subscription_id
