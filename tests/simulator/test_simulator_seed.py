from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from simulator.control import SimulatorControl
from simulator.seed import load_seed
from simulator.state import Simulator


def test_a_seed_file_registers_credentials_and_usage(tmp_path: Path) -> None:
    seed = tmp_path / "seed.json"
    token = "sk-ant-oat01-" + "s" * 40
    seed.write_text(
        json.dumps([{"token": token, "kind": "oauth", "label": "demo", "usage": {"five_hour": 97}}])
    )
    sim = Simulator()
    assert load_seed(sim, seed) == 1
    window = sim.lookup(token).windows["five_hour"]
    assert window.utilization == pytest.approx(0.97, abs=0.01)
    assert sim.lookup(token).label == "demo"


def test_a_codex_seed_entry_carries_its_sign_in(tmp_path: Path) -> None:
    seed = tmp_path / "seed.json"
    token = "eyJhbGciOiJub25lIn0.eyJleHAiOjB9.c2ln"
    entry = {"token": token, "kind": "codex", "label": "demo-codex", "plan_type": "pro"}
    entry |= {"account_id": "acct-demo", "refresh_token": "rt-demo-" + "r" * 20}
    seed.write_text(json.dumps([entry]))
    sim = Simulator()
    assert load_seed(sim, seed) == 1
    cred = sim.lookup(token)
    assert cred.kind == "codex" and cred.account_id == "acct-demo"
    assert "rt-demo-" + "r" * 20 in sim.refresh_grants


@pytest.mark.parametrize("content", ['{"token": 1}', '[{"kind": "oauth"}]'])
def test_a_malformed_seed_is_refused_by_entry(tmp_path: Path, content: str) -> None:
    seed = tmp_path / "seed.json"
    seed.write_text(content)
    with pytest.raises(ValueError, match=str(seed)):
        load_seed(Simulator(), seed)


def test_the_simulator_process_boots_with_its_seed(tmp_path: Path) -> None:
    seed = tmp_path / "seed.json"
    token = "sk-ant-oat01-" + "b" * 40
    seed.write_text(json.dumps([{"token": token, "kind": "oauth", "label": "booted"}]))
    process = subprocess.Popen(
        [sys.executable, "-m", "simulator", "--port", "0", "--seed", str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip().rsplit(" ", 1)[-1]
        with SimulatorControl(url) as control:
            assert control.credential("booted")["kind"] == "oauth"
        assert httpx.get(f"{url}/_control/credentials", timeout=5).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=10)
