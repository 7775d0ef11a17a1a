"""The fleet benchmark: switching policies side by side on simulated quotas.

``python -m bench.fleet`` (``make bench-fleet``) replays the kept traces (or one given
with ``--trace``) under this project's policy, three simpler ones and the hindsight
optimum, prints a markdown table and writes plots. docs/benchmarks.md says what each
figure means and how the optimum is computed. This package imports no Django at
import time; ``bench.fleet.__main__`` boots it (settings only, no database).
"""
