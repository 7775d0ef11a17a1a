"""deploy/docker_proxy's readers of the swarm runtime's bodies, as tables: the
runtime's own service create (agents/runtimes/swarm_spec.py ``service_body``), secret
and network creates pass unchanged; every variation that is not an agent's is refused
with a reason that names the field and never quotes the environment or a secret's
data. The same calls through the real proxy in front of a real swarm manager are
tests/swarm/test_docker_proxy_services.py; these are the edges that need no engine.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import docker
import pytest
from django.test import override_settings

from agents.runtimes.base import SpawnSpec
from agents.runtimes.swarm import SwarmRuntime, agents_overlay
from agents.runtimes.swarm_spec import service_body
from tests.deploy.conftest import IMAGE, proxy
from trinity.crypto import Secret

Refused = proxy.Refused
NETWORK = "trinity-agents-test"
NETWORK_ID = "n3tw0rkid0000000000000001"
OTHER_NETWORK_ID = "0therid000000000000000002"
SECRET_ID = "s3cretid00000000000000001"
SECRET_NAME = "trinity-agent-bot-abc123"
ENV_CANARY = "env-canary-7f3a9c"
DATA_CANARY = "data-canary-51b8e2"
POLICY = proxy.Policy(image=IMAGE, network=NETWORK)


def read_service(body: Any) -> Any:
    """The body as the proxy reads it off the wire: JSON, then the service reader."""
    reader = proxy.service.service_reader(POLICY, lambda: {NETWORK, NETWORK_ID})
    return reader(proxy.gojson.read_json(json.dumps(body).encode()), "service")


def runtime_body(
    *, endpoint: str = "name", constraints: str = "", placement: dict[str, str] | None = None
) -> dict[str, Any]:
    """The runtime's own service create for agent "bot", one environment entry added
    (the canary a refusal must not repeat)."""
    spec = SpawnSpec(
        name="bot",
        runtime="claude-code",
        model="",
        secret=Secret("s3cret"),
        placement=placement or {},
    )
    swarm = {
        "TRINITY_AGENT_IMAGE": IMAGE,
        "TRINITY_SWARM_ENDPOINT": endpoint,
        "TRINITY_SWARM_CONSTRAINTS": constraints,
    }
    with override_settings(**swarm):
        body = service_body(
            spec, network=NETWORK_ID, secret=(SECRET_ID, SECRET_NAME), start_id="abc123"
        )
    body["TaskTemplate"]["ContainerSpec"]["Env"].append(f"CANARY={ENV_CANARY}")
    return body


@pytest.mark.parametrize(
    ("endpoint", "constraints", "placement"),
    [
        ("name", "", {}),
        ("published", "", {}),
        ("name", "node.role==worker", {"trinity.pool": "gpu-less"}),
        ("published", "node.role != manager,node.hostname==n2", {"zone": "Eu-West_1"}),
    ],
)
def test_the_runtimes_own_service_create_passes_unchanged(
    endpoint: str, constraints: str, placement: dict[str, str]
) -> None:
    body = runtime_body(endpoint=endpoint, constraints=constraints, placement=placement)

    assert read_service(body) == body


def test_the_service_may_name_the_agents_network_by_its_name() -> None:
    body = runtime_body()
    body["TaskTemplate"]["Networks"] = [{"Target": NETWORK}]

    assert read_service(body) == body


def _spec(body: dict[str, Any]) -> dict[str, Any]:
    return body["TaskTemplate"]["ContainerSpec"]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change that sets the field at ``path`` (dots; ``[n]`` indexes a list)."""

    def change(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        holder: Any = body
        for part in parents:
            name, _, index = part.partition("[")
            holder = holder[name]
            if index:
                holder = holder[int(index.rstrip("]"))]
        holder[last] = value

    return change


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        holder: Any = body
        for part in parents:
            holder = holder[part]
        del holder[last]

    return change


def _add_mount(mount: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda body: _spec(body)["Mounts"].append(mount)


def _add_secret(body: dict[str, Any]) -> None:
    secrets = _spec(body)["Secrets"]
    secrets.append({**secrets[0], "SecretID": "an0thers3cret000000000002"})


CTR = "TaskTemplate.ContainerSpec"
VARIATIONS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a bind mount of the host": (
        _add_mount({"Type": "bind", "Source": "/", "Target": "/host"}),
        "Mounts[3] must be a mount of type tmpfs or volume",
    ),
    "a bind mount in lower case": (
        _add_mount({"type": "bind", "source": "/", "target": "/host"}),
        "Mounts[3] must be a mount of type",
    ),
    "a volume with a source": (
        _set(f"{CTR}.Mounts[2].Source", "pgdata"),
        "Mounts[2].Source must be empty",
    ),
    "a volume with driver options": (
        _set(f"{CTR}.Mounts[2].VolumeOptions", {"DriverConfig": {"Name": "local"}}),
        "Mounts[2].'VolumeOptions' is not a field",
    ),
    "a tmpfs elsewhere": (_set(f"{CTR}.Mounts[0].Target", "/etc"), "Mounts[0].Target must be"),
    "a tmpfs with exec": (
        _set(f"{CTR}.Mounts[0].TmpfsOptions.Options", [["exec"]]),
        "TmpfsOptions.'Options' is not a field",
    ),
    "one target mounted twice": (
        _add_mount({"Type": "tmpfs", "Target": "/tmp"}),
        "mounts one target twice",
    ),
    "Privileges": (
        _set(f"{CTR}.Privileges", {"SELinuxContext": {"Disable": True}}),
        "ContainerSpec.'Privileges' is not a field",
    ),
    "Hosts": (_set(f"{CTR}.Hosts", ["10.0.0.1 db"]), "ContainerSpec.'Hosts' is not a field"),
    "Sysctls": (
        _set(f"{CTR}.Sysctls", {"net.ipv4.ip_forward": "1"}),
        "ContainerSpec.'Sysctls' is not a field",
    ),
    "Isolation": (_set(f"{CTR}.Isolation", "hyperv"), "ContainerSpec.'Isolation' is not"),
    "Init": (_set(f"{CTR}.Init", True), "ContainerSpec.'Init' is not a field"),
    "User": (_set(f"{CTR}.User", "root"), "ContainerSpec.'User' is not a field"),
    "another image": (_set(f"{CTR}.Image", "alpine:3"), "ContainerSpec.Image must be"),
    "a writable root": (_set(f"{CTR}.ReadOnly", False), "ReadOnly must be True"),
    "no read-only root": (_drop(f"{CTR}.ReadOnly"), "sets service.TaskTemplate.ContainerSpec"),
    "no capability dropped": (_drop(f"{CTR}.CapabilityDrop"), "sets service.TaskTemplate"),
    "a capability outside the set": (
        _set(f"{CTR}.CapabilityAdd", ["CHOWN", "NET_ADMIN", "SYS_ADMIN"]),
        "not 'SYS_ADMIN'",
    ),
    "a repeated capability": (
        _set(f"{CTR}.CapabilityAdd", ["CHOWN", "CHOWN"]),
        "not a repeated one",
    ),
    "the agent label missing": (
        _set(f"{CTR}.Labels", {"trinity.start": "abc123"}),
        "must hold the 'trinity.agent' label",
    ),
    "a label outside the namespace": (
        _set("Labels", {"trinity.agent": "bot", "com.docker.stack.namespace": "x"}),
        "Labels.'com.docker.stack.namespace' is not an agent's label",
    ),
    "a secret that is not the agent's": (
        _set(f"{CTR}.Secrets[0].SecretName", "trinity_db_password"),
        "SecretName must be a name that starts with 'trinity-agent-'",
    ),
    "a secret by an id that is not a swarm id": (
        _set(f"{CTR}.Secrets[0].SecretID", "../../x"),
        "SecretID must be a swarm id",
    ),
    "a secret file readable by all": (
        _set(f"{CTR}.Secrets[0].File.Mode", 0o444),
        "File.Mode must be 256",
    ),
    "a secret file of another owner": (_set(f"{CTR}.Secrets[0].File.UID", "1000"), "File.UID"),
    "a secret at another path": (
        _set(f"{CTR}.Secrets[0].File.Name", "../../etc/passwd"),
        "File.Name must be 'trinity-agent-env'",
    ),
    "a second secret": (_add_secret, "Secrets must be a list of 0 to 1 item(s)"),
    "a config": (_set(f"{CTR}.Configs", []), "ContainerSpec.'Configs' is not a field"),
    "another network": (
        _set("TaskTemplate.Networks", [{"Target": OTHER_NETWORK_ID}]),
        "Networks[0].Target must be the agents' network 'trinity-agents-test'",
    ),
    "a second network": (
        _set("TaskTemplate.Networks", [{"Target": NETWORK_ID}, {"Target": OTHER_NETWORK_ID}]),
        "Networks must be a list of exactly 1 item(s)",
    ),
    "no network": (_set("TaskTemplate.Networks", []), "Networks must be a list of exactly 1"),
    "a network alias": (
        _set("TaskTemplate.Networks", [{"Target": NETWORK_ID, "Aliases": ["postgres"]}]),
        "Networks[0].'Aliases' is not a field",
    ),
    "the deprecated top-level networks": (
        _set("Networks", [{"Target": OTHER_NETWORK_ID}]),
        "service.'Networks' is not a field",
    ),
    "a missing process limit": (
        _drop("TaskTemplate.Resources.Limits.Pids"),
        "sets service.TaskTemplate.Resources.Limits.Pids",
    ),
    "a missing memory limit": (
        _drop("TaskTemplate.Resources.Limits.MemoryBytes"),
        "sets service.TaskTemplate.Resources.Limits.MemoryBytes",
    ),
    "no limits": (_drop("TaskTemplate.Resources.Limits"), "sets service.TaskTemplate.Resources"),
    "a zero CPU limit": (
        _set("TaskTemplate.Resources.Limits.NanoCPUs", 0),
        "Limits.NanoCPUs must be a positive integer",
    ),
    "a generic resource": (
        _set("TaskTemplate.Resources.Reservations.GenericResources", []),
        "Reservations.'GenericResources' is not a field",
    ),
    "restart condition any": (
        _set("TaskTemplate.RestartPolicy.Condition", "any"),
        "RestartPolicy.Condition must be 'none'",
    ),
    "no restart policy": (_drop("TaskTemplate.RestartPolicy"), "sets service.TaskTemplate"),
    "a constraint with a second clause": (
        _set("TaskTemplate.Placement.Constraints", ["node.role==worker,node.role==manager"]),
        "Constraints[0] must be one test of a node",
    ),
    "a constraint with odd characters": (
        _set("TaskTemplate.Placement.Constraints", ['node.labels.zone=="eu"']),
        "Constraints[0] must be one test of a node",
    ),
    "a constraint with a line break": (
        _set("TaskTemplate.Placement.Constraints", ["node.role==worker\nnode.role==manager"]),
        "Constraints[0] must be one test of a node",
    ),
    "a constraint on something else": (
        _set("TaskTemplate.Placement.Constraints", ["node.spec.availability==active"]),
        "Constraints[0] must be one test of a node",
    ),
    "a placement preference": (
        _set("TaskTemplate.Placement.Preferences", [{"Spread": {"SpreadDescriptor": "x"}}]),
        "Placement.'Preferences' is not a field",
    ),
    "a log driver": (
        _set("TaskTemplate.LogDriver", {"Name": "syslog"}),
        "TaskTemplate.'LogDriver' is not a field",
    ),
    "a service name without the prefix": (
        _set("Name", "postgres"),
        "service.Name must be a name that starts with 'trinity-agent-'",
    ),
    "ports in ingress mode": (
        _set(
            "EndpointSpec",
            {
                "Mode": "dnsrr",
                "Ports": [{"Protocol": "tcp", "TargetPort": 8080, "PublishMode": "ingress"}],
            },
        ),
        "Ports[0].PublishMode must be 'host'",
    ),
    "a chosen published port": (
        _set(
            "EndpointSpec.Ports",
            [{"Protocol": "tcp", "TargetPort": 8080, "PublishMode": "host", "PublishedPort": 22}],
        ),
        "Ports[0].'PublishedPort' is not a field",
    ),
    "another target port": (
        _set(
            "EndpointSpec.Ports",
            [{"Protocol": "tcp", "TargetPort": 22, "PublishMode": "host"}],
        ),
        "Ports[0].TargetPort must be 8080",
    ),
    "a virtual IP": (_set("EndpointSpec.Mode", "vip"), "EndpointSpec.Mode must be 'dnsrr'"),
    "a global service": (
        _set("Mode", {"Global": {}}),
        "service.Mode.'Global' is not a field",
    ),
    "two replicas": (_set("Mode.Replicated.Replicas", 2), "Replicas must be 1"),
    "an update config": (
        _set("UpdateConfig", {"Parallelism": 1}),
        "service.'UpdateConfig' is not a field",
    ),
    "a negative grace period": (
        _set(f"{CTR}.StopGracePeriod", -1),
        "StopGracePeriod must be an integer of zero or more",
    ),
    "an environment that is not strings": (
        _set(f"{CTR}.Env", [f"CANARY={ENV_CANARY}", 1]),
        "ContainerSpec.Env is not a list of strings",
    ),
}


@pytest.mark.parametrize(("change", "reason"), list(VARIATIONS.values()), ids=list(VARIATIONS))
def test_a_service_create_that_is_not_an_agents_is_refused(
    change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    body = runtime_body(endpoint="published", constraints="node.role==worker")
    change(body)

    with pytest.raises(Refused) as refused:
        read_service(body)

    assert refused.value.status == 403
    assert reason in refused.value.reason
    assert ENV_CANARY not in refused.value.reason


def test_a_key_in_another_case_reads_as_the_engine_reads_it() -> None:
    """Go matches a struct's field names in any case: ``privileges`` is Privileges."""
    body = runtime_body()
    _spec(body)["privileges"] = {"SELinuxContext": {"Disable": True}}

    with pytest.raises(Refused) as refused:
        read_service(body)

    assert "ContainerSpec.'privileges' is not a field" in refused.value.reason


def test_the_rebuilt_body_is_in_canonical_case() -> None:
    body = runtime_body()
    lower = copy.deepcopy(body)
    lower["taskTemplate"] = lower.pop("TaskTemplate")
    lower["taskTemplate"]["containerSpec"] = lower["taskTemplate"].pop("ContainerSpec")

    assert read_service(lower) == body


class _Sent(Exception):
    def __init__(self, method: str, target: str, body: Any) -> None:
        super().__init__(method)
        self.method, self.target = method, target
        self.body: Any = json.loads(body) if body else None


class _Wire(docker.APIClient):
    """The docker SDK's own calls, stopped at the wire: the first request it would send
    is raised instead. Its ``networks`` answers that there is none, so the runtime's
    ``agents_overlay`` goes on to its create; the lookup's own request is
    ``docker.APIClient.networks``'s."""

    def send(self, request: Any, **kwargs: Any) -> Any:
        raise _Sent(request.method, request.path_url, request.body)

    def networks(self, names: Any = None, ids: Any = None, filters: Any = None) -> Any:
        return []


class _Client:
    api = _Wire(base_url="tcp://127.0.0.1:9", version="1.41")


def sent(call: Callable[[Any], Any]) -> _Sent:
    """The request ``call(client)`` sends first, as the SDK builds it."""
    try:
        call(_Client())
    except _Sent as request:
        return request
    raise AssertionError("the SDK sent nothing")


def _runtime_secret(client: Any) -> Any:
    spec = SpawnSpec(
        name="bot",
        runtime="claude-code",
        model="",
        secret=Secret(DATA_CANARY),
        credentials={"CLAUDE_CODE_OAUTH_TOKEN": Secret(DATA_CANARY)},
    )
    return SwarmRuntime._create_secret(client, spec, "abc123")


def _runtime_network(encrypted: bool) -> Callable[[Any], Any]:
    def call(client: Any) -> Any:
        swarm = {
            "TRINITY_SWARM_NETWORK": NETWORK,
            "TRINITY_SWARM_NETWORK_CREATE": True,
            "TRINITY_SWARM_NETWORK_ENCRYPTED": encrypted,
        }
        with override_settings(**swarm):
            return agents_overlay(client)

    return call


def test_the_runtimes_own_secret_create_passes_unchanged() -> None:
    request = sent(_runtime_secret)
    call = proxy.target.read_call(request.method, request.target)

    assert call.route == "secret_create"
    assert proxy.secret.secret_reader(POLICY)(request.body, "secret") == request.body


@pytest.fixture
def secret_body() -> Iterator[dict[str, Any]]:
    yield sent(_runtime_secret).body


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_set("Name", "trinity_db_password"), "secret.Name must be a name that starts with"),
        (_set("Labels", {"trinity.start": "abc123"}), "must hold the 'trinity.agent' label"),
        (_set("Labels", {"trinity.agent": "bot", "x": "1"}), "Labels.'x' is not an agent's"),
        (_set("Driver", {"Name": "vault"}), "secret.'Driver' is not a field"),
        (_set("Templating", {"Name": "golang"}), "secret.'Templating' is not a field"),
        (_set("Data", f"{DATA_CANARY}!"), "secret.Data must be base64"),
        (_drop("Data"), "sets secret.Data"),
    ],
)
def test_a_secret_create_that_is_not_an_agents_is_refused(
    secret_body: dict[str, Any], change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    change(secret_body)

    with pytest.raises(Refused) as refused:
        proxy.secret.secret_reader(POLICY)(secret_body, "secret")

    assert reason in refused.value.reason
    assert DATA_CANARY not in refused.value.reason
    assert base64.b64encode(DATA_CANARY.encode()).decode()[:12] not in refused.value.reason


@pytest.mark.parametrize("encrypted", [True, False])
def test_the_runtimes_own_network_create_passes_unchanged(encrypted: bool) -> None:
    request = sent(_runtime_network(encrypted))
    call = proxy.target.read_call(request.method, request.target)

    assert call.route == "network_create"
    assert proxy.network.network_reader(POLICY)(request.body, "network") == request.body


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_set("Name", "trinity-backend"), "network.Name must be 'trinity-agents-test'"),
        (_set("Driver", "bridge"), "network.Driver must be 'overlay'"),
        (_set("Attachable", True), "network.'Attachable' is not a field"),
        (_set("Ingress", True), "network.'Ingress' is not a field"),
        (_set("IPAM", {"Config": [{"Subnet": "10.0.0.0/8"}]}), "network.'IPAM' is not"),
        (_set("Options", {"encrypted": "", "com.docker.network.mtu": "9000"}), "'encrypted'"),
        (_set("Labels", {}), "network.Labels must be"),
        (_drop("CheckDuplicate"), "sets network.CheckDuplicate"),
    ],
)
def test_a_network_create_that_is_not_the_agents_is_refused(
    change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    body = sent(_runtime_network(True)).body
    change(body)

    with pytest.raises(Refused) as refused:
        proxy.network.network_reader(POLICY)(body, "network")

    assert reason in refused.value.reason


@pytest.mark.parametrize(
    ("call", "route"),
    [
        (lambda c: docker.APIClient.networks(c.api, names=[NETWORK]), "network_list"),
        (lambda c: c.api.secrets(filters={"label": "trinity.agent=bot"}), "secret_list"),
        (lambda c: c.api.remove_secret(SECRET_ID), "secret_remove"),
        (lambda c: c.api.services(filters={"label": "trinity.agent=bot"}), "service_list"),
        (lambda c: c.api.inspect_service("trinity-agent-bot"), "service_inspect"),
        (lambda c: c.api.remove_service(SECRET_ID), "service_remove"),
        (lambda c: c.api.tasks(filters={"service": SECRET_ID}), "task_list"),
        (lambda c: c.api.inspect_node("n0de"), "node_inspect"),
    ],
)
def test_the_sdks_swarm_calls_name_their_route(call: Callable[[Any], Any], route: str) -> None:
    request = sent(call)

    assert proxy.target.read_call(request.method, request.target).route == route


def _query(request: _Sent) -> dict[str, str]:
    return proxy.target.read_call(request.method, request.target).query


def test_the_sdks_list_filters_are_read_and_reencoded() -> None:
    services = _query(sent(lambda c: c.api.services(filters={"label": "trinity.agent=bot"})))
    tasks = _query(sent(lambda c: c.api.tasks(filters={"service": SECRET_ID})))
    networks = _query(sent(lambda c: docker.APIClient.networks(c.api, names=[NETWORK])))

    assert proxy.queries.label_list_query(POLICY, services) == {
        "filters": '{"label":{"trinity.agent=bot":true}}'
    }
    assert proxy.queries.task_service(tasks) == SECRET_ID
    assert proxy.queries.network_list_query(POLICY, networks) is None


@pytest.mark.parametrize(
    ("read", "filters"),
    [
        ("label_list_query", {}),
        ("label_list_query", {"name": ["trinity-agent-bot"]}),
        ("label_list_query", {"label": ["com.docker.stack.namespace=trinity"]}),
        ("label_list_query", {"label": ["trinity.agent=bot"], "name": ["x"]}),
        ("network_list_query", {"name": ["trinity"]}),
        ("network_list_query", {"name": [NETWORK, "ingress"]}),
        ("network_list_query", {"driver": ["overlay"]}),
        ("network_list_query", {}),
        ("task_service", {}),
        ("task_service", {"service": [SECRET_ID, OTHER_NETWORK_ID]}),
        ("task_service", {"node": ["n0de"]}),
        ("task_service", {"service": [SECRET_ID], "desired-state": ["running"]}),
        ("task_service", {"service": ["../x"]}),
    ],
)
def test_a_list_that_is_not_the_agents_is_refused(read: str, filters: dict[str, Any]) -> None:
    query = {"filters": json.dumps(filters)} if filters else {}
    reader = getattr(proxy.queries, read)

    with pytest.raises(Refused) as refused:
        reader(query) if read == "task_service" else reader(POLICY, query)

    assert refused.value.status == 403


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("POST", "/v1.41/services/abc/update?version=1"),  # an update replaces the spec
        ("GET", "/v1.41/services/abc/logs"),
        ("GET", "/v1.41/secrets/abc"),  # inspecting a secret is the proxy's own check
        ("POST", "/v1.41/secrets/abc/update"),
        ("GET", "/v1.41/nodes"),
        ("POST", "/v1.41/nodes/abc/update"),
        ("DELETE", "/v1.41/nodes/abc"),
        ("GET", "/v1.41/tasks/abc"),
        ("GET", "/v1.41/swarm"),  # holds the join tokens
        ("POST", "/v1.41/swarm/leave"),
        ("GET", "/v1.41/configs"),
        ("DELETE", "/v1.41/networks/abc"),
        ("GET", "/v1.41/networks/abc"),
        ("GET", "/v1.41/services/abc?insertDefaults=1"),
        ("GET", "/v1.41/services?status=1"),
    ],
)
def test_every_other_swarm_call_is_refused(method: str, target: str) -> None:
    with pytest.raises(Refused) as refused:
        proxy.target.read_call(method, target)

    assert refused.value.status == 403


def test_every_route_the_proxy_reads_has_its_rule() -> None:
    decide = proxy.decide.Decide(POLICY, "engine.sock")

    assert decide.routes == {route.name for route in proxy.target.ROUTES}
