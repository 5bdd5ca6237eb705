"""A platform forked from the test process, for what starting `python -m loom.api` costs.

Starting the platform is mostly importing it: ~3.5 s of CPU each time, paid by ~170 platforms in
a run of the suite (a third of the integration tests' CPU). A test process imports Loom once;
each platform is then a fork of it that runs `python -m loom.api` in a process of its own, with
its own environment, standard output and error, exactly as an exec would, only without
importing again. What the child inherits from the test process and an exec would not have is
put back: the file descriptors (all closed but the log; the test process's garbage collected
before the fork and the rest frozen, so that no finalizer closes a number the platform reuses),
the environment, the signal handlers, the warnings filters, logging and `sys.std*` (pytest
captures them), the exit handlers.

A test that needs a real exec (one that reads the platform's `/proc/PID/environ`, which a fork
keeps from its parent) asks for it: `Server(..., fork=False)`; `LOOM_TEST_FORK=0` execs all.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import gc
import io
import logging
import os
import pathlib
import runpy
import signal
import subprocess
import sys
import time
import traceback
import warnings
from typing import IO

ENABLED = os.environ.get("LOOM_TEST_FORK", "1") != "0"
# The interpreter's own filters, before pytest adds a test's: what an exec'd platform starts with.
_STARTUP_WARNINGS = list(warnings.filters)


_PRELOADED: set[str] = set()


def preload(module: str) -> None:
    """Import what `python -m MODULE` imports, once per test process: its own imports and what
    building its app imports late (the dialects' routes, Alembic for the schema; ~1 s of the
    ~1.4 s of CPU a forked platform otherwise spends before it answers), mappers configured,
    and what its first job reads once (the installed packages)."""
    if module != "loom.api" or module in _PRELOADED:
        return
    _PRELOADED.add(module)
    import alembic.command
    import alembic.config
    import alembic.runtime.environment
    import alembic.runtime.migration
    import alembic.script  # noqa: F401
    from sqlalchemy.orm import configure_mappers

    import loom.api.__main__
    import loom.dialects
    import loom.store.tables
    from loom.environments.sections import provided

    loom.dialects.routers()
    loom.dialects.middleware()
    loom.dialects.upload_prefixes()
    loom.dialects.pipeline_dialects()
    configure_mappers()
    provided()  # the platform's own packages, read from their metadata (0.3 s) at its first job


class Forked:
    """What the tests use of `subprocess.Popen`, for a forked `python -m MODULE ARGS`."""

    def __init__(self, module: str, args: list[str], env: dict[str, str], out: IO[bytes]) -> None:
        preload(module)
        self.args = [sys.executable, "-m", module, *args]
        self.returncode: int | None = None
        sys.stdout.flush()
        sys.stderr.flush()
        # Garbage of this process is finalized here, not in the child: there its descriptors'
        # numbers belong to the platform's own files (its database), which a late finalizer
        # would close ("disk I/O error", "Bad file descriptor": seen in the browser tests).
        gc.collect()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child never returns)
            _run(module, args, env, out.fileno())
        self.pid = pid

    def poll(self) -> int | None:
        if self.returncode is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _run(module: str, args: list[str], env: dict[str, str], log: int) -> None:
    """In the child: become `python -m MODULE ARGS`, then exit with its status."""
    code = 1
    gc.freeze()  # and what this process had is never collected in the child either
    try:
        _become_fresh(env, log)
        with contextlib.suppress(OSError):  # `ps` and profilers name it, not pytest
            pathlib.Path("/proc/self/comm").write_text(module[:15])
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _become_fresh(env: dict[str, str], log: int) -> None:
    os.dup2(log, 1)
    os.dup2(log, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.closerange(3, 1 << 16)  # pipes and sockets of the test process and its other children
    faulthandler.disable()
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
    os.environ.clear()
    os.environ.update(env)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    atexit._clear()  # the test process's, not the platform's
    warnings.filters[:] = _STARTUP_WARNINGS
    root = logging.getLogger()
    for handler in list(root.handlers):  # pytest's capture: logging.basicConfig would keep it
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
