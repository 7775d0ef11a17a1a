"""deploy/docker_proxy's readers as tables: what the proxy takes from a body, a
request-target and a query, and what it refuses because the engine (Go) would read it
otherwise or not at all. The same rules run against the real engine in
tests/deploy/test_docker_proxy_bypasses.py; these are the edges that need no engine."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.conftest import proxy

read_json = proxy.gojson.read_json
read_call = proxy.target.read_call
Refused = proxy.Refused


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b'{"Image": "a", "Labels": {"x": "1"}}', {"Image": "a", "Labels": {"x": "1"}}),
        (b' [1, "two", null, true] ', [1, "two", None, True]),
        ('{"Env": ["A=\u00e9"]}'.encode(), {"Env": ["A=\u00e9"]}),  # non-ASCII values are fine
    ],
)
def test_a_plain_document_reads_as_itself(raw: bytes, value: Any) -> None:
    assert read_json(raw) == value


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b'{"Image": "a", "image": "b"}', "appears twice"),
        (b'{"HostConfig": {"Binds": [], "BINDS": []}}', "appears twice"),
        (b'{"HostConfig": {"Mounts": [{"Type": "tmpfs", "type": "bind"}]}}', "appears twice"),
        (b'{"Image": "a", "Image": "a"}', "appears twice"),
        (b'{"Ho\\u017ftConfig": {}}', "outside printable ASCII"),  # Go folds it onto s
        (b'{"\\u212aey": 1}', "outside printable ASCII"),  # the Kelvin sign: a k to Go
        (b'{"Image\\n": 1}', "outside printable ASCII"),
        (b'{"Memory": NaN}', "NaN is not JSON"),
        (b'{"Memory": -Infinity}', "-Infinity is not JSON"),
        (b'{"Env": ["\\ud800"]}', "lone surrogate"),  # Go would read U+FFFD
        (b'\xef\xbb\xbf{"Image": "a"}', "byte-order mark"),
        (b'{"Image": "\xff"}', "not UTF-8"),
        (b'{"Image": "a"}{"Image": "b"}', "not one JSON document"),  # Go reads the first
        (b"[" * 40 + b"]" * 40, "nests deeper"),
        (b"", "not one JSON document"),
    ],
)
def test_a_document_go_would_read_otherwise_is_refused(raw: bytes, why: str) -> None:
    with pytest.raises(Refused) as refused:
        read_json(raw)
    assert why in refused.value.reason
    assert refused.value.status == 400


@pytest.mark.parametrize(
    ("method", "target", "route", "forwarded"),
    [
        ("GET", "/_ping", "ping", "/_ping"),
        ("HEAD", "/v1.41/_ping", "ping", "/v1.41/_ping"),
        ("GET", "/v1.41/version", "version", "/v1.41/version"),
        ("GET", "/version", "version", "/version"),
        ("POST", "/v1.41/containers/create?name=trinity-agent-bot", "create", None),
        ("POST", "/v1.47/containers/create?name=trinity-agent-bot", "create", None),
        ("GET", "/v1.41/containers/json?all=1&limit=-1&filters=%7B%7D", "list", None),
        ("GET", "/v1.41/containers/trinity-agent-bot/json", "inspect", None),
        ("POST", "/v1.41/containers/abc/stop?t=10", "stop", None),
        ("DELETE", "/v1.41/containers/abc?v=True&link=False&force=True", "remove", None),
    ],
)
def test_the_sdks_targets_name_their_call(
    method: str, target: str, route: str, forwarded: str | None
) -> None:
    call = read_call(method, target)
    assert call.route == route
    if forwarded is not None:
        assert call.target() == forwarded


@pytest.mark.parametrize(
    ("method", "target", "status"),
    [
        ("POST", "/containers/%63reate?name=trinity-agent-bot", 400),  # Go decodes the path
        ("POST", "//containers/create", 400),  # Go cleans it (a redirect)
        ("POST", "/containers/../containers/create", 400),
        ("POST", "/v1.23/containers/create", 403),  # read differently by the engine
        ("POST", "/v1/containers/create", 400),
        ("POST", "/v1.41.0/containers/create", 400),
        ("POST", "/containers/create?name=a&name=b", 400),  # which one would Go take?
        ("POST", "/containers/create?name=a;b", 400),
        ("POST", "/containers/create?name=%zz", 400),
        ("POST", "/containers/create?platform=linux", 403),
        ("POST", "/containers/abc/exec", 403),
        ("POST", "/containers/abc/kill", 403),
        ("GET", "/containers/abc/logs", 403),
        ("GET", "/containers/create", 403),
        ("PUT", "/containers/abc/archive?path=/", 403),
        ("GET", "http://docker/version", 400),
        ("GET", "/version#x", 400),
    ],
)
def test_a_target_read_otherwise_or_not_the_runtimes_is_refused(
    method: str, target: str, status: int
) -> None:
    with pytest.raises(Refused) as refused:
        read_call(method, target)
    assert refused.value.status == status
