"""A fork server for learner wrappers: `python -m loom.learner.spawner`.

Starting a Python interpreter and importing the wrapper costs ~50 ms, most of the platform's
overhead on a short job. The local launcher keeps one spawner running, which has done that
once; each learner is a fork of it, in its own session, so it outlives both the spawner and the
platform.

The spawner never holds a secret: its standard input is a `SOCK_SEQPACKET` socket on which each
request is one message, `{"spec": "/path/spec.json", "log": "/path/wrapper.log"}`, carrying the
read end of a pipe as ancillary data. The fork inherits that pipe and reads its job's token and
data-store credentials from it; the spawner closes its copy unread, so no later fork (another
job's wrapper) can find them in memory it inherited. The answer is `{"pid": 1234}`. When the
platform goes away (end of file), the spawner exits; the wrappers it forked go on.

`--tied` (on a cluster node, under the engine's actor that holds the learner's resources): each
wrapper is told when the spawner dies (with its actor, or its node), and then kills its learner
and exits without a word, as it would have with the node.
"""

from __future__ import annotations

import json
import os
import shutil  # noqa: F401  (imported once here, so that no fork pays for it)
import signal
import socket
import sys
import traceback
import zipfile  # noqa: F401
from pathlib import Path
from typing import Any

from loom.learner import tensorboard, wrapper  # noqa: F401  (tensorboard: warmed for forks)
from loom.learner.shipper import write_json_atomic

MAX_REQUEST = 1 << 16


def _credentials(fd: int) -> tuple[str, dict[str, dict[str, str]]]:
    """The token and the data stores' secrets, read from this learner's own pipe."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    body = json.loads(b"".join(chunks) or b"{}")
    return str(body.get("token", "")), dict(body.get("secrets") or {})


def _child(request: dict[str, Any], fd: int, tied: bool) -> None:
    """In the fork: a new session, its pid on record, output to the log file, the wrapper."""
    code = 1
    try:
        if tied:
            _die_with_parent(wrapper.HOST_LOST)
        os.setsid()
        folder = os.path.dirname(request["spec"])
        # Written here, before anything else, so that a platform killed right after asking for
        # this learner finds it on restart instead of launching the job a second time.
        write_json_atomic(Path(folder) / "pid.json", {"pid": os.getpid(), "create_time": None})
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir(folder)
        token, secrets = _credentials(fd)
        code = wrapper.run_spec(request["spec"], token, secrets)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _die_with_parent(sig: int) -> None:
    import ctypes

    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the call
        os.kill(os.getpid(), sig)


def _serve(channel: socket.socket, tied: bool) -> None:
    while True:
        try:
            raw, fds, _flags, _addr = socket.recv_fds(channel, MAX_REQUEST, 1)
        except OSError:
            return
        if not raw and not fds:
            return  # the platform has gone
        try:
            request = json.loads(raw)
            if len(fds) != 1:
                raise ValueError("a request carries exactly one credentials pipe")
            pid = os.fork()
        except (ValueError, OSError) as exc:
            for fd in fds:
                os.close(fd)
            channel.send(json.dumps({"error": str(exc)}).encode())
            continue
        if pid == 0:
            channel.close()
            _child(request, fds[0], tied)
        os.close(fds[0])
        channel.send(json.dumps({"pid": pid}).encode())


def main() -> None:
    # Children are reaped by the kernel: the launcher watches them by pid, not by wait().
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    # Whatever the platform's process had set, the spawner stops on SIGTERM.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    channel = socket.socket(fileno=os.dup(0))
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)  # fd 0 again, for the forks to replace
    _serve(channel, "--tied" in sys.argv[1:])


if __name__ == "__main__":
    main()
