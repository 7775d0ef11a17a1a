"""Every policy the fleet benchmark runs, in the order its tables list them."""

from __future__ import annotations

from bench.fleet.policies import (
    FixedPolicy,
    PiRouterPolicy,
    Policy,
    RoundRobinPolicy,
    SoonestWeeklyResetPolicy,
    SwitchOnFailurePolicy,
)
from bench.fleet.project import (
    BandedProjectPolicy,
    ProjectPolicy,
    RebalancingProjectPolicy,
    RulesProjectPolicy,
    UnplacedProjectPolicy,
)

POLICIES: tuple[type[Policy], ...] = (
    ProjectPolicy,
    RulesProjectPolicy,
    UnplacedProjectPolicy,
    BandedProjectPolicy,
    RebalancingProjectPolicy,
    FixedPolicy,
    RoundRobinPolicy,
    SwitchOnFailurePolicy,
    PiRouterPolicy,
    SoonestWeeklyResetPolicy,
)
