"""The routing explainer: where an agent's next turn would run, and why.

``explanation`` drives the planner on evidence gathered read-only, ``text`` renders the
result as lines, ``api`` serves it at ``GET /api/agents/{name}/routing``.
"""

from __future__ import annotations
