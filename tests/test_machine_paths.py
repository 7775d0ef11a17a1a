"""No tracked file depends on one machine's layout: code, tests and docs name files by
their path in the repository.

A test that looked for the Claude Code CLI under one machine's checkout found it
there and nowhere else, so it skipped in every clean clone; a doc that cites a path
outside the repository sends a reader to a file they do not have.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Absolute paths that only exist on somebody's machine: a user's home, a root home, a
# scratch or work area. `(?<![\w/:.-])` keeps URLs (`postgres://root@...`) and
# relative paths (`var/agents/...`) out.
MACHINE_PATH = re.compile(r"(?<![\w/:.~-])/(?:work|root|Users|home|tmp/scratch)/[\w.-]+")
# Paths that exist by design wherever the code runs, each with the reason.
ALLOWED = {
    # The agent container's home, created by deploy/Dockerfile.agent itself.
    "/home/agent",
}
# Lock files carry registry URLs and hashes, never a machine path; skip their bulk.
SKIPPED_SUFFIXES = ("package-lock.json", ".png", ".svg", ".ico", ".woff2")


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    return [
        REPO / name for name in listed.split("\0") if name and not name.endswith(SKIPPED_SUFFIXES)
    ]


def machine_paths(text: str) -> list[str]:
    return [
        found
        for found in MACHINE_PATH.findall(text)
        if not any(found == ok or found.startswith(ok + "/") for ok in ALLOWED)
    ]


# The examples are joined at run time, so this file names no machine path either and
# the scan below covers it like every other file.
R = "/"


def test_it_spots_a_machine_path_and_lets_urls_and_repository_paths_be() -> None:
    assert machine_paths(f"see {R}work/shared/notes/cli.md") == [f"{R}work/shared"]
    assert machine_paths(f'Path("{R}tmp/scratch/cc/node_modules")') == [f"{R}tmp/scratch/cc"]
    assert machine_paths(f"HOME={R}root/.claude and {R}Users/me/x") == [
        f"{R}root/.claude",
        f"{R}Users/me",
    ]
    assert machine_paths("postgres://root@127.0.0.1:5432/test") == []
    assert machine_paths("agent_server/node_modules/.bin/claude, var/agents/a/.trinity") == []
    assert machine_paths(f"TRINITY_AGENT_HOME={R}home/agent/work") == []


def test_no_tracked_file_names_a_machine_path() -> None:
    found = {}
    for path in tracked_files():
        if not path.is_file():
            continue  # deleted in the working tree, not yet committed
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        if hits := machine_paths(text):
            found[str(path.relative_to(REPO))] = hits
    assert found == {}
