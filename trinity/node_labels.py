"""An agent's node placement (``Agent.placement``): node label name -> the value a
node must carry for the agent's server to run there, e.g. ``{"trinity.pool":
"gpu-less"}``. The swarm runtime turns each entry into the placement constraint
``node.labels.<name>==<value>``; the local and docker runtimes ignore it.

The shapes are narrow on purpose: a name and a value are spliced into a constraint
string, so neither may carry an operator (``==``, ``!=``), a space, a quote, a comma
or a line break that could read as a second constraint or another test.

One check, ``placement_problem``, serves the agents API, the model's validator and the
panel (which reads the patterns and the cap from ``generated/tables.json``, written by
``manage.py panel_tables``). It lives in ``trinity``, not ``agents``, because the
panel's tables are generated here and dependencies point from agents to trinity.
Pure: the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

MAX_LABELS: Final = 8
# A node label's name: lower case, dots allowed (``trinity.pool``), 1 to 63 characters,
# starting and ending with a letter or digit.
NAME_PATTERN: Final = r"[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?"
# Its value: letters of either case, digits, ``.``, ``-`` and ``_``, 1 to 63 characters,
# starting and ending with a letter or digit.
VALUE_PATTERN: Final = r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?"
# How much of a refused name an error repeats; a value is never repeated.
SHOWN: Final = 40

_NAME = re.compile(NAME_PATTERN)
_VALUE = re.compile(VALUE_PATTERN)
_JSON_TYPES: Final = ((bool, "a boolean"), (int, "a number"), (float, "a number"))
_NAME_RULE = (
    "1 to 63 lower-case letters, digits, '.', '-' or '_', starting and ending with a "
    "letter or digit"
)
_VALUE_RULE = "1 to 63 letters, digits, '.', '-' or '_', starting and ending with a letter or digit"


def _shown(name: str) -> str:
    """``name`` as an error quotes it: at most ``SHOWN`` characters, escaped."""
    if len(name) <= SHOWN:
        return ascii(name)
    return f"{ascii(name[:SHOWN])}…"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    for python_type, word in _JSON_TYPES:
        if isinstance(value, python_type):
            return word
    return "a list" if isinstance(value, list) else "an object"


def label_problem(name: object, value: object) -> str | None:
    """None when ``name`` and ``value`` make one valid entry, else what is wrong with
    it, naming the label (cut to ``SHOWN`` characters, escaped) and never the value."""
    if not isinstance(name, str):
        return "Every label name is text."
    if not _NAME.fullmatch(name):
        return f"Label name {_shown(name)}: {_NAME_RULE}."
    if not isinstance(value, str):
        return f"Label {_shown(name)}: the value is text, not {_kind(value)}."
    if not _VALUE.fullmatch(value):
        return f"Label {_shown(name)}: the value is {_VALUE_RULE}."
    return None


def placement_problem(placement: object) -> str | None:
    """None when ``placement`` is a valid placement (an object of at most
    ``MAX_LABELS`` label names to values), else what is wrong: the first bad entry's
    ``label_problem``. Raises nothing."""
    if not isinstance(placement, Mapping):
        return (
            "Placement is an object of node label names to values, e.g. "
            '{"trinity.pool": "gpu-less"}.'
        )
    if len(placement) > MAX_LABELS:
        return f"At most {MAX_LABELS} labels ({len(placement)} given)."
    for name, value in placement.items():
        problem = label_problem(name, value)
        if problem is not None:
            return problem
    return None


def swarm_constraints(placement: Mapping[str, str]) -> list[str]:
    """The swarm placement constraints ``placement`` means, one per label, sorted by
    name: ``node.labels.<name>==<value>``. Raises ValueError (with
    ``placement_problem``'s words) on an invalid placement: a row written before the
    check, or around it, never reaches a constraint string."""
    problem = placement_problem(placement)
    if problem is not None:
        raise ValueError(problem)
    return [f"node.labels.{name}=={placement[name]}" for name in sorted(placement)]
