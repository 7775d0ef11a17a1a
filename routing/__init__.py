"""The routing core: which credential may serve a turn, and in which order, decided
from facts alone.

Pure: no Django, no database driver, no cache, no clock, no I/O; every rule takes
``now``. The floor just above ``trinity_contract``: it imports only the standard
library, ``trinity_contract`` and itself (``tests/routing/test_purity.py``), and every
app may import it. Gatherers (``execution/``, ``subscriptions/``, the fleet benchmark's
memory) read the facts; this package judges them:

- ``eligibility.py``: ``admit``, the one verdict on whether a plan may serve a turn;
- ``planner/``: the order of a turn (evidence in, the next action out);
- ``walk.py``: the walk's state and next rung;
- ``policy.py``: the routing policy's verdicts;
- ``attempt_refusal.py``: what a refused attempt means;
- ``headroom/``: the rules on readings (freshness, tier, readmission, ranking,
  balance, placement, forecasts);
- ``billing.py``, ``providers.py``, ``rung.py``: the catalog, the providers and their
  keys, the rung.

See ``docs/architecture.md`` ("The routing core") and ``docs/flows/adding-a-rule.md``.
"""
