"""`python -m agent_server --uds PATH`, or `--host 127.0.0.1 --port PORT` (port 0 picks
a free port).

Prints exactly one flushed line, `agent server listening on unix://PATH` (or
`http://HOST:PORT`), once the socket is listening, so a parent process can read where
it listens (with LOG_FORMAT=json it is a JSON log line on stderr with that message).

Before it reads its configuration it takes its environment from the file
`TRINITY_AGENT_ENV_FILE` names, if any (`agent_server/envfile.py`); with
`TRINITY_AGENT_EGRESS_GUARD=1` it installs the egress guard before anything else
(`agent_server/egress.py`). Either failing stops it with exit 2 before it listens.

With `--uds` (the local runtime) the server binds the Unix socket itself, in a
directory that must be owned by this user and 0700, so no other local user can
connect to it or bind it first; see `bind_unix_socket`.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import logging
import os
import socket
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from agent_server.app import create_app
from agent_server.config import AgentConfig, ConfigError, load_config
from agent_server.egress import EgressGuardError, egress_guard_install
from agent_server.envfile import EnvFileError, env_file_apply
from agent_server.isolation import IsolationError
from trinity_contract.egress import egress_allow_text
from trinity_contract.log_json import JsonFormatter
from trinity_contract.log_lines import EscapingFilter
from trinity_contract.redaction import Redactor, install_log_redaction

# How long an idle client connection stays open; the platform's client gives up on an
# idle connection after a third of this.
SERVER_KEEPALIVE_SECONDS = 75
# sun_path holds 108 bytes on Linux, the terminating NUL included.
UNIX_PATH_MAX = 107
# The exit status when another server of this agent holds the socket (its lock): the
# local runtime reads it as a concurrent start, not as a failure of the agent.
EXIT_SOCKET_HELD = 3


class SocketRefused(RuntimeError):
    """The Unix socket path is not one this server may bind; nothing was bound."""


class SocketHeld(SocketRefused):
    """Another agent server holds the socket's lock."""


@dataclass
class UnixListener:
    """A bound, listening Unix socket and the lock that makes it this server's."""

    sock: socket.socket
    path: Path
    lock_fd: int
    inode: int

    def close(self) -> None:
        """Remove the socket file if it is still ours, then release the lock."""
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self.inode:
                self.path.unlink()
        os.close(self.lock_fd)


def bind_unix_socket(path: Path) -> UnixListener:
    """Bind and listen on ``path``; raises SocketRefused with the reason.

    The directory must be a real directory (not a symlink) owned by this user with
    mode 0700. A lock file beside the socket (``<name>.lock``, held for the server's
    life) keeps two servers of one agent apart. An existing path is replaced only when
    it is a stale socket of this user's (nobody accepts on it); anything else there
    (a file, another user's socket, a process that listens) is left alone and refused.
    """
    if not path.is_absolute():
        raise SocketRefused(f"{path}: the socket path must be absolute")
    size = len(os.fsencode(path))
    if size > UNIX_PATH_MAX:
        raise SocketRefused(
            f"{path}: {size} bytes, over the {UNIX_PATH_MAX}-byte limit of a Unix socket path"
        )
    directory = path.parent
    try:
        info = os.lstat(directory)
    except OSError as exc:
        raise SocketRefused(f"{directory}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise SocketRefused(f"{directory}: not a directory owned by this user")
    if stat.S_IMODE(info.st_mode) != 0o700:
        raise SocketRefused(
            f"{directory}: mode {stat.S_IMODE(info.st_mode):04o}, the socket directory must be 0700"
        )
    lock_path = directory / f"{path.name}.lock"
    lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SocketHeld(f"{path}: another agent server holds it") from None
        _clear_stale_socket(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            os.chmod(path, 0o600)
            # Listening before the banner: a client that connects at once waits in
            # the backlog until uvicorn accepts, instead of being refused.
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise SocketRefused(f"{path}: cannot bind: {exc.strerror}") from None
        return UnixListener(sock=sock, path=path, lock_fd=lock_fd, inode=os.lstat(path).st_ino)
    except BaseException:
        os.close(lock_fd)
        raise


def _clear_stale_socket(path: Path) -> None:
    """Unlink ``path`` if it is a socket of this user's that nobody accepts on."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.geteuid():
        raise SocketRefused(f"{path}: exists and is not a socket of this user's")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except ConnectionRefusedError:
        path.unlink()  # stale: left by a server of this agent that was killed
        return
    except OSError as exc:
        raise SocketRefused(f"{path}: in an unknown state ({exc.strerror})") from None
    finally:
        probe.close()
    raise SocketRefused(f"{path}: another process listens on it")


def configure_logging(
    redactor: Redactor, level: str, fmt: str = "plain", *, agent: str = ""
) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(redactor, agent=agent))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # uvicorn's loggers propagate to root (log_config=None below), so this one
    # filtered handler sees every line the process logs.
    install_log_redaction(
        redactor, [root, *(logging.getLogger(n) for n in ("uvicorn", "uvicorn.error"))]
    )
    # After redaction: a path or a header holding a newline or an escape sequence (the
    # forwarder's refused paths, uvicorn's access lines, decoded) cannot make a line.
    handler.addFilter(EscapingFilter())


def _boot() -> AgentConfig | None:
    """The configuration, once the environment file is applied and the egress guard
    is in place when asked for; None (said on stderr) when the server must not start."""
    try:
        # The swarm runtime's secret, when there is one: its values are this
        # process's environment from here on, so the config and the baseline the
        # CLI's environment is layered from (create_app) both read them.
        env_file_apply(os.environ)
        config = load_config()
        if config.egress_guard:
            egress_guard_install(config.agent_user, config.egress_allow)
    except (EnvFileError, ConfigError, EgressGuardError) as exc:
        print(f"agent server: refusing to start: {exc}", file=sys.stderr, flush=True)
        return None
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--uds", type=Path, help="listen on this Unix socket instead")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)

    config = _boot()
    if config is None:
        return 2
    redactor = Redactor()
    configure_logging(redactor, args.log_level, config.log_format, agent=config.agent_name)
    try:
        app = create_app(config, redactor=redactor)
    except IsolationError as exc:
        logging.getLogger("agent_server").error("refusing to start: %s", exc)
        return 2

    listener = None
    if args.uds is not None:
        try:
            listener = bind_unix_socket(args.uds)
        except SocketRefused as exc:
            print(f"agent server: refusing to start: {exc}", file=sys.stderr, flush=True)
            return EXIT_SOCKET_HELD if isinstance(exc, SocketHeld) else 2
        sock = listener.sock
        where = f"unix://{args.uds}"
    else:
        sock = _tcp_listener(args.host, args.port)
        where = f"http://{args.host}:{sock.getsockname()[1]}"

    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_config=None,
            log_level=args.log_level,
            # In-flight turns are cancelled after this; cancellation kills their
            # process groups.
            timeout_graceful_shutdown=5,
            # Idle connections stay open well past the platform client's own idle
            # limit (agents/client.py KEEPALIVE_SECONDS): the client always closes
            # first, so it never sends a turn on a connection this server is closing
            # (uvicorn's 5 s default equalled httpx's, and under load a reused
            # connection met the close: "Server disconnected without a response").
            timeout_keep_alive=SERVER_KEEPALIVE_SECONDS,
            loop="asyncio",  # what the CLI's subprocesses run on, not the gateway's uvloop
            http="h11",
        )
    )
    _announce(config, where)
    try:
        server.run(sockets=[sock])
    finally:
        if listener is not None:
            listener.close()
    return 0


def _tcp_listener(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Listening before the line is printed: a client that connects at once waits in the
    # backlog until uvicorn accepts, instead of being refused.
    sock.listen(128)
    return sock


def _guard_text(config: AgentConfig) -> str:
    if not config.egress_guard:
        return "off"
    allowed = egress_allow_text(config.egress_allow)
    return f"on (allowing {allowed})" if allowed else "on"


def _announce(config: AgentConfig, where: str) -> None:
    """Log what serves, then the one banner line a parent process reads."""
    logging.getLogger("agent_server").info(
        "runtime=%s model=%s home=%s cli=%s egress_guard=%s",
        config.runtime,
        config.model or "(runtime default)",
        config.home,
        config.claude_bin if config.runtime == "claude-code" else "-",
        _guard_text(config),
    )
    banner = f"agent server listening on {where}"
    if config.log_format == "json":
        # Every line is one JSON object; this one's message is the same banner.
        logging.getLogger("agent_server").info(banner)
    else:
        print(banner, flush=True)


if __name__ == "__main__":
    sys.exit(main())
