"""The committed bounds sidecars belong to the kept traces as they are now.

A kept trace regenerated without its sidecar would make ``make bench-fleet`` solve
the bounds again (minutes) and show figures nobody committed: this fails first.
"""

from __future__ import annotations

import json

import pytest

from bench.fleet.__main__ import KEPT, TRACES
from bench.fleet.bounds import sha256_of, sidecar_current, sidecar_of


@pytest.mark.parametrize("name", KEPT)
def test_the_kept_traces_sidecar_records_its_sha256_and_bounds_in_order(name):
    path = TRACES / f"{name}.jsonl"
    raw = json.loads(sidecar_of(path).read_text(encoding="utf-8"))

    assert raw["trace_sha256"] == sha256_of(path)
    assert sidecar_current(path)
    assert 0 < raw["lower_usd"] <= raw["achievable_usd"]
    # A bracket tight enough to judge a policy by (issue 31).
    assert raw["achievable_usd"] <= 1.5 * raw["lower_usd"]


def test_a_sidecar_is_stale_once_its_trace_changes(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("{}\n", encoding="utf-8")
    sidecar_of(path).write_text(json.dumps({"trace_sha256": sha256_of(path)}), encoding="utf-8")
    assert sidecar_current(path)

    path.write_text("{} \n", encoding="utf-8")
    assert not sidecar_current(path)
    assert not sidecar_current(tmp_path / "missing.jsonl")
