"""One OS user per local agent: its name, and (as root) its creation and removal.

The creation and removal tests run `useradd`/`userdel` for real, so they need root;
under CI=true (which runs as root) they never skip.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agents.runtimes.agent_users import (
    AGENT_ID_MAX,
    AGENT_ID_MIN,
    NAME_MAX,
    AgentUserError,
    agent_user_comment,
    agent_user_ensure,
    agent_user_name,
    agent_user_remove,
    agent_users_of,
    installation_tag,
)
from tests.procs import alive
from tests.skip_policy import in_ci

SLEEP = shutil.which("sleep") or "/bin/sleep"
# Debian's useradd NAME_REGEX.
VALID_NAME = re.compile(r"[a-z_][a-z0-9_-]*")


@pytest.mark.parametrize(
    "key",
    ["bot", "A" * 100, "research_Agent-7", "___", "x" * 14 + "tail"],
)
def test_a_users_name_fits_useradd_and_32_characters(key: str) -> None:
    name = agent_user_name(key=key, tag=installation_tag(Path("/srv/one")))
    assert len(name) <= NAME_MAX
    assert VALID_NAME.fullmatch(name), name


@pytest.mark.parametrize("key", ["bot", "researcher", "alice-private-project", "x" * 100])
def test_neither_the_name_nor_the_comment_tells_the_agents_name(key: str) -> None:
    """/etc/passwd is every agent's to read (bound into each sandbox): an agent's user
    must not tell another operator's code what that agent is called."""
    tag = installation_tag(Path("/srv/one"))
    name, comment = agent_user_name(key=key, tag=tag), agent_user_comment(key=key, tag=tag)
    assert re.fullmatch(rf"ta{tag[:6]}-[0-9a-f]{{16}}", name), name
    assert key[:3] not in name.removeprefix(f"ta{tag[:6]}-")
    assert key not in comment and comment.startswith(f"Trinity agent {tag} ")


def test_two_installations_and_two_agents_never_share_a_name() -> None:
    one, two = installation_tag(Path("/srv/one")), installation_tag(Path("/srv/two"))
    long_a, long_b = "a" * 99 + "1", "a" * 99 + "2"  # alike in their readable part
    names = {
        agent_user_name(key="bot", tag=one),
        agent_user_name(key="bot", tag=two),
        agent_user_name(key=long_a, tag=one),
        agent_user_name(key=long_b, tag=one),
    }
    assert len(names) == 4
    assert agent_user_name(key="bot", tag=one) == agent_user_name(key="bot", tag=one)


@pytest.fixture
def tag() -> Iterator[str]:
    """A fresh installation tag; every user made under it is removed afterwards."""
    if os.geteuid() != 0:
        if in_ci():
            pytest.fail("CI runs as root: the agent users' tests must run")
        pytest.skip("making OS users needs root")
    fresh = secrets.token_hex(6)
    yield fresh
    for name in agent_users_of(fresh):
        agent_user_remove(name=name, comment=pwd.getpwnam(name).pw_gecos)


def test_a_user_is_made_once_even_when_two_starts_race(tag: str) -> None:
    name = agent_user_name(key="racer", tag=tag)
    comment = agent_user_comment(key="racer", tag=tag)

    with ThreadPoolExecutor(max_workers=4) as pool:
        users = list(pool.map(lambda _: agent_user_ensure(name=name, comment=comment), range(4)))
    again = agent_user_ensure(name=name, comment=comment)

    assert {u.uid for u in users} == {again.uid}
    entry = pwd.getpwnam(name)
    assert (entry.pw_uid, entry.pw_gecos, entry.pw_shell) == (
        again.uid,
        comment,
        "/usr/sbin/nologin",
    )
    assert entry.pw_uid != 0 and entry.pw_gid != 0
    assert agent_users_of(tag) == [name]


def test_a_users_ids_lie_in_the_agents_own_range_above_every_system_user(tag: str) -> None:
    # A container's processes run their image's system uids (999 and below) on this
    # host's kernel: an agent user there would be killed with them, or kill them.
    name = agent_user_name(key="ranged", tag=tag)
    user = agent_user_ensure(name=name, comment=agent_user_comment(key="ranged", tag=tag))

    assert AGENT_ID_MIN <= user.uid <= AGENT_ID_MAX
    assert AGENT_ID_MIN <= user.gid <= AGENT_ID_MAX


def test_a_user_that_is_not_the_agents_is_refused_and_never_removed(tag: str) -> None:
    name = agent_user_name(key="squatted", tag=tag)
    agent_user_ensure(name=name, comment=agent_user_comment(key="someone-else", tag=tag))

    with pytest.raises(AgentUserError, match="not this agent's"):
        agent_user_ensure(name=name, comment=agent_user_comment(key="squatted", tag=tag))
    with pytest.raises(AgentUserError, match="not this agent's"):
        agent_user_remove(name=name, comment=agent_user_comment(key="squatted", tag=tag))
    assert pwd.getpwnam(name).pw_name == name


def test_removing_a_user_kills_its_processes_first_and_deletes_it(tag: str) -> None:
    name = agent_user_name(key="leaver", tag=tag)
    comment = agent_user_comment(key="leaver", tag=tag)
    user = agent_user_ensure(name=name, comment=comment)
    # A daemon of the user's, in a session of its own, as a tool would leave it.
    lingering = subprocess.Popen(  # noqa: S603 - fixed argv
        [SLEEP, "300"],
        user=user.uid,
        group=user.gid,
        extra_groups=[],
        start_new_session=True,
    )
    bystander = subprocess.Popen([SLEEP, "300"])  # noqa: S603 - root's, not the user's

    try:
        assert agent_user_remove(name=name, comment=comment) is True
        lingering.wait(timeout=10)
        assert lingering.returncode == -9
        assert alive(bystander.pid)
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
        assert agent_user_remove(name=name, comment=comment) is False  # idempotent
    finally:
        bystander.kill()
        bystander.wait(timeout=10)
        if lingering.poll() is None:
            lingering.kill()


def test_the_makefiles_shared_agent_user_takes_its_ids_from_the_same_range() -> None:
    # `make setup` creates the default agent user in shell: its range must be this one.
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    assert f"AGENT_IDS := {AGENT_ID_MIN} {AGENT_ID_MAX}\n" in makefile
