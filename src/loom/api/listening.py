"""Where the API listens: its TCP port, kept across a restart where it can be, and a unix
socket in its home for this machine's own clients.

The socket (`LOOM_HOME/api.sock`, in a home only its owner can enter) cannot be taken by anyone
else, so the CLI on the platform's machine sends its token there and never to a TCP port that
some other process may have taken while the platform was down. Clients that reach the TCP
port check the platform's identity first (`api.identity`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import psutil

SOCKET = "api.sock"
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes with its NUL; leave some room
_bound_inodes: dict[int, int] = {}  # a unix socket's descriptor → the inode of its file


def previous_port(home: Path) -> int:
    """The port this home's platform had last time (asked for port 0 again: the same one, so
    that the clients and learners that know it find it), or 0 for any free one."""
    try:
        url = json.loads((home / "server.json").read_text())["url"]
        return int(urlsplit(url).port or 0)
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def listen_tcp(host: str, port: int, *, remembered: int = 0) -> socket.socket:
    """The API's listening socket on `port`; for port 0, the `remembered` one if it is free,
    else any."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if port == 0 and remembered:
        with contextlib.suppress(OSError):
            return _bound(family, host, remembered)
    return _bound(family, host, port)


def _bound(family: socket.AddressFamily, host: str, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # Not SO_REUSEPORT: with it, a second process could share the port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def taken(host: str, port: int, exc: OSError) -> str:
    """Why the port cannot be had, naming what holds it where this machine says."""
    holders = []
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
                holders.append(_describe(conn.pid))
    held = f", held by {', '.join(sorted(set(holders)))}" if holders else ""
    return f"cannot listen on {host}:{port} ({exc.strerror or exc}){held}"


def _describe(pid: int | None) -> str:
    if pid is None:
        return "a process of another user"
    try:
        process = psutil.Process(pid)
        return f"pid {pid} ({' '.join(process.cmdline())[:80]}, user {process.username()})"
    except psutil.Error:
        return f"pid {pid}"


def listen_unix(home: Path) -> socket.socket | None:
    """`home/api.sock`, only its owner's; None where the path is too long for a socket."""
    path = home / SOCKET
    if len(str(path).encode()) > MAX_SOCKET_PATH:
        return None
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # an earlier server's (the home is ours alone: nobody else made it)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    _bound_inodes[sock.fileno()] = os.stat(path).st_ino
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def close_unix(sock: socket.socket, home: Path) -> None:
    """Remove the socket's file, unless another server of this home has put its own there."""
    path = home / SOCKET
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == _bound_inodes.get(sock.fileno()):
            path.unlink()
    sock.close()
