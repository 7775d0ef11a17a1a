"""Provider simulator: the Anthropic Messages API with plan quota, plus the OpenAI
endpoints the Codex CLI calls (simulator/codex.py) and the Codex usage shape.

Dev, test and bench only. Start it with ``python -m simulator --port 0``; drive it
with :class:`simulator.control.SimulatorControl`; run it from Python with
:class:`simulator.process.SimulatorProcess`.
"""

from __future__ import annotations
