"""Build the project's images on an engine that can pull nothing.

    python deploy/images.py base        # the Debian base, made with debootstrap
    python deploy/images.py agent       # deploy/Dockerfile.agent FROM that base
    python deploy/images.py backend     # deploy/Dockerfile.backend FROM that base
    python deploy/images.py services    # deploy/Dockerfile.services: the deployment
                                        # test's Postgres and Redis (Debian's packages)

Each prints the tag it built (or found) on stdout; DOCKER_HOST says which engine.

**The base** (``trinity-base:<hash>``) is Debian ``trixie`` made by ``debootstrap
--variant=minbase`` with the packages in ``BASE_PACKAGES`` installed by apt inside
it (apt resolves their dependencies; debootstrap's ``--include`` does not, fully),
and the build host's CA bundle in place of Debian's, then ``docker import``-ed with
the clients' CA variables pointing at it. ``<hash>`` is a hash of that recipe, so a changed recipe
is a new image, and the same recipe is made once: the engine keeps the image, and
the root file system's tarball is kept in the image cache (``TRINITY_IMAGE_CACHE``,
default ``~/.cache/trinity/images``), so a fresh engine imports it instead of running
debootstrap again. Trixie, because its ``nodejs`` (20) runs the Claude Code CLI and
bookworm's (18) does not.

**The app images** are built with the classic builder, ``--network host`` (the steps
reach the package registries, nothing else) and the base as the ``BASE_IMAGE`` build
argument; on a host with a registry the same Dockerfiles build from their defaults
(``node:22-bookworm-slim``, ``python:3.11-slim-bookworm``). They are tagged
``trinity-agent:latest`` and ``trinity-backend:latest``, the names
deploy/compose.yaml and the settings use.

Standard library only, like deploy/engine.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
SUITE = "trixie"
MIRROR = "http://deb.debian.org/debian"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# Every client in the base reads the CA bundle from here (pip, npm and node, httpx).
CA_ENV = ("PIP_CERT", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
BASE_PACKAGES = ("ca-certificates", "git", "nodejs", "npm", "python3", "python3-venv")
IMAGES = {
    "agent": ("deploy/Dockerfile.agent", "trinity-agent:latest"),
    "backend": ("deploy/Dockerfile.backend", "trinity-backend:latest"),
    "services": ("deploy/Dockerfile.services", "trinity-services:latest"),
}


class BuildError(RuntimeError):
    """A step of an image build failed; the message names it and its log."""


def cache_dir() -> Path:
    explicit = os.environ.get("TRINITY_IMAGE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trinity" / "images"


def host_ca_bundle() -> Path:
    """The build host's CA bundle: the base trusts what the host trusts, so its steps
    reach the registries through a TLS-inspecting proxy as the host's own clients do."""
    return Path(os.environ.get("SSL_CERT_FILE") or CA_BUNDLE)


def base_tag() -> str:
    bundle = host_ca_bundle()
    recipe = json.dumps(
        {
            "suite": SUITE,
            "mirror": MIRROR,
            "packages": sorted(BASE_PACKAGES),
            "ca": hashlib.sha256(bundle.read_bytes()).hexdigest() if bundle.exists() else "",
            "v": 1,
        },
        sort_keys=True,
    )
    return f"trinity-base:{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def log_dir() -> Path:
    path = ROOT / ".docker-engine" / "builds"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _run(
    command: list[str],
    *,
    log_name: str,
    stdin: IO[bytes] | None = None,
    env: dict[str, str] | None = None,
) -> None:
    log = log_dir() / f"{log_name}.log"
    with log.open("wb") as out:
        result = subprocess.run(  # noqa: S603 - fixed command lines
            command, stdout=out, stderr=subprocess.STDOUT, stdin=stdin, env=env, check=False
        )
    if result.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise BuildError(f"{command[0]} {command[1]} failed ({log}): {' / '.join(tail)}")


def image_exists(tag: str) -> bool:
    result = subprocess.run(  # noqa: S603 - a fixed command line
        ["docker", "image", "inspect", tag],  # noqa: S607 - the engine's client, on PATH
        capture_output=True,
        check=False,
    )
    return result.returncode == 0


def _rootfs_tarball(target: Path) -> None:
    """debootstrap a minimal trixie, apt-install the base packages, tar it to target."""
    if shutil.which("debootstrap") is None:
        raise BuildError("debootstrap is missing (apt-get install debootstrap)")
    work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=log_dir()))
    try:
        root = work / "root"
        _run(
            ["debootstrap", "--variant=minbase", SUITE, str(root), MIRROR],
            log_name="base-debootstrap",
        )
        shutil.copy("/etc/resolv.conf", root / "etc" / "resolv.conf")
        env_apt = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]
        _run(
            ["chroot", str(root), *env_apt, "install", "-y", "-qq", "--no-install-recommends"]
            + list(BASE_PACKAGES),
            log_name="base-packages",
        )
        _run(["chroot", str(root), "apt-get", "clean"], log_name="base-clean")
        if host_ca_bundle().exists():
            shutil.copy(host_ca_bundle(), root / CA_BUNDLE.lstrip("/"))
        (root / "etc" / "resolv.conf").write_text("")
        shutil.rmtree(root / "var" / "lib" / "apt" / "lists", ignore_errors=True)
        partial = target.with_suffix(".partial")
        _run(["tar", "-C", str(root), "-cf", str(partial), "."], log_name="base-tar")
        partial.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ensure_base() -> str:
    """The base image's tag, made (or imported from the cache) when the engine lacks it."""
    tag = base_tag()
    if image_exists(tag):
        return tag
    tarball = cache_dir() / f"{tag.replace(':', '-')}.tar"
    if not tarball.exists():
        tarball.parent.mkdir(parents=True, exist_ok=True)
        _rootfs_tarball(tarball)
    with tarball.open("rb") as data:
        changes = [f"--change=ENV {name}={CA_BUNDLE}" for name in CA_ENV]
        _run(["docker", "import", *changes, "-", tag], log_name="base-import", stdin=data)
    return tag


def build(kind: str) -> str:
    """Build one of IMAGES FROM the base; returns its tag. The engine's build cache
    makes a rebuild of unchanged files a matter of seconds."""
    dockerfile, tag = IMAGES[kind]
    base = ensure_base()
    _run(
        [
            "docker",
            "build",
            "--network=host",
            f"--build-arg=BASE_IMAGE={base}",
            f"--build-arg=NODE_IMAGE={base}",
            "-f",
            str(ROOT / dockerfile),
            "-t",
            tag,
            str(ROOT),
        ],
        log_name=f"build-{kind}",
        # The classic builder: it takes --network=host on every engine this runs on.
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )
    return tag


def main(argv: list[str]) -> int:
    kinds = argv[1:]
    if not kinds or any(kind not in {"base", *IMAGES} for kind in kinds):
        print(f"usage: python deploy/images.py base|{'|'.join(IMAGES)} ...", file=sys.stderr)
        return 2
    try:
        for kind in kinds:
            print(ensure_base() if kind == "base" else build(kind))
    except BuildError as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
