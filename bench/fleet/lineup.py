"""Every policy the fleet benchmark runs, in the order its tables list them."""

from __future__ import annotations

from bench.fleet.policies import FixedPolicy, Policy, RoundRobinPolicy, SwitchOnFailurePolicy
from bench.fleet.project import BandedProjectPolicy, ProjectPolicy, RebalancingProjectPolicy

POLICIES: tuple[type[Policy], ...] = (
    ProjectPolicy,
    BandedProjectPolicy,
    RebalancingProjectPolicy,
    FixedPolicy,
    RoundRobinPolicy,
    SwitchOnFailurePolicy,
)
