"""The client sends nothing to an endpoint that has not proven the agent's secret.

A stand-in agent server on loopback TCP (as docker endpoints are) or on a Unix socket
(as local ones are) answers ``/health?nonce=`` honestly, with another secret's proof,
with a proof replayed from an earlier nonce, or with none; every request it receives
is recorded, so what is asserted is what reached it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from agents import client as client_module
from agents.client import AgentServerClient, AgentServerUnavailable, EndpointUnproven
from routing.rung import Rung, RungKind
from tests.agents.standin import SECRET, StandIn, close, serve
from trinity.crypto import Secret

OVERRIDE = Rung(RungKind.SUBSCRIPTION, Secret("sk-ant-oat01-" + "p" * 30), 1, "plan-a")


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    StandIn.mode = "honest"
    StandIn.seen = []
    client_module._verified.clear()
    yield
    client_module._verified.clear()


@pytest.fixture(params=["tcp", "unix"])
def endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    directory = Path(tempfile.mkdtemp(prefix="proof-"))
    server, where = serve(request.param, directory)
    yield where
    close(server)
    shutil.rmtree(directory, ignore_errors=True)


def _turn(client: AgentServerClient) -> Any:
    return client.run_turn(
        execution_id="e-1", message="the prompt", timeout_seconds=30, rung=OVERRIDE
    )


def _posts() -> list[dict[str, Any]]:
    return [seen for seen in StandIn.seen if seen["method"] == "POST"]


@pytest.mark.parametrize("mode", ["wrong secret", "replay", "no proof", "503"])
def test_an_endpoint_that_cannot_prove_the_secret_gets_nothing(endpoint: str, mode: str) -> None:
    StandIn.mode = mode
    client = AgentServerClient(endpoint=endpoint, secret=SECRET, handle="42")
    with pytest.raises(EndpointUnproven, match="did not prove it holds the agent's secret") as err:
        _turn(client)
    assert endpoint in str(err.value)
    assert _posts() == []  # no prompt, no override
    assert [seen["path"].split("=")[0] for seen in StandIn.seen] == ["/health?nonce"]
    assert all("Authorization" not in seen["headers"] for seen in StandIn.seen)
    with pytest.raises(EndpointUnproven):
        client.reload_token(token=Secret("sk-ant-oat01-" + "r" * 30), remove_api_key=True)
    assert _posts() == []


def test_each_proof_is_asked_for_a_fresh_nonce(endpoint: str) -> None:
    client = AgentServerClient(endpoint=endpoint, secret=SECRET, handle="42")
    client.health()
    client.health()
    nonces = [parse_qs(urlsplit(seen["path"]).query)["nonce"][0] for seen in StandIn.seen]
    assert len(nonces) == 2 and nonces[0] != nonces[1]


def test_a_proven_endpoint_serves_turns_without_another_round_trip(endpoint: str) -> None:
    client = AgentServerClient(endpoint=endpoint, secret=SECRET, handle="42")
    assert _turn(client).ok
    assert _turn(AgentServerClient(endpoint=endpoint, secret=SECRET, handle="42")).ok
    assert [seen["method"] for seen in StandIn.seen] == ["GET", "POST", "POST"]
    assert all(seen["headers"]["Authorization"] == f"Bearer {SECRET.reveal()}" for seen in _posts())


def test_another_process_handle_on_the_same_endpoint_must_prove_itself_again(
    endpoint: str,
) -> None:
    assert _turn(AgentServerClient(endpoint=endpoint, secret=SECRET, handle="42")).ok
    StandIn.mode = "wrong secret"  # what now answers there is not the server that proved
    with pytest.raises(EndpointUnproven):
        _turn(AgentServerClient(endpoint=endpoint, secret=SECRET, handle="43"))
    assert len(_posts()) == 1


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_a_connection_error_drops_the_verification_and_a_new_holder_must_prove_itself(
    transport: str, tmp_path: Path
) -> None:
    directory = Path(tempfile.mkdtemp(prefix="proof-"))
    try:
        server, endpoint = serve(transport, directory)
        client = AgentServerClient(endpoint=endpoint, secret=SECRET, handle="42")
        assert _turn(client).ok
        assert (endpoint, "42") in client_module._verified
        close(server)  # the real server dies: its endpoint is free

        with pytest.raises(AgentServerUnavailable):
            _turn(client)
        assert (endpoint, "42") not in client_module._verified

        StandIn.mode = "wrong secret"  # and another process binds it first
        squatter, again = serve(transport, directory, reuse=endpoint)
        assert again == endpoint
        try:
            with pytest.raises(EndpointUnproven):
                _turn(client)
        finally:
            close(squatter)
        assert len(_posts()) == 1  # only the turn the real server served
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_each_unix_socket_has_one_pooled_client_per_process(tmp_path: Path) -> None:
    first = client_module._sockets.get("/run/a.sock")
    assert client_module._sockets.get("/run/a.sock") is first
    assert client_module._sockets.get("/run/b.sock") is not first
