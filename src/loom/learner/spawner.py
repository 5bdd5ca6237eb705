"""A fork server for learner wrappers: `python -m loom.learner.spawner`.

Starting a Python interpreter and importing the wrapper costs ~50 ms, most of the platform's
overhead on a short job. The local launcher keeps one spawner running, which has done that
once; each learner is a fork of it, in its own session, so it outlives both the spawner and the
platform. Requests and answers are JSON lines on stdin and stdout:

    {"spec": "/path/spec.json", "token": "...", "log": "/path/wrapper.log"}  →  {"pid": 1234}
"""

from __future__ import annotations

import json
import os
import shutil  # noqa: F401  (imported once here, so that no fork pays for it)
import signal
import sys
import traceback
import zipfile  # noqa: F401
from pathlib import Path
from typing import Any

from loom.learner import tensorboard, wrapper  # noqa: F401  (tensorboard: warmed for forks)
from loom.learner.shipper import write_json_atomic


def _child(request: dict[str, Any]) -> None:
    """In the fork: a new session, its pid on record, output to the log file, the wrapper."""
    code = 1
    try:
        os.setsid()
        folder = os.path.dirname(request["spec"])
        # Written here, before anything else, so that a platform killed right after asking for
        # this learner finds it on restart instead of launching the job a second time.
        write_json_atomic(Path(folder) / "pid.json", {"pid": os.getpid(), "create_time": None})
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir(folder)
        code = wrapper.run_spec(request["spec"], request["token"], request.get("secrets") or {})
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    # Children are reaped by the kernel: the launcher watches them by pid, not by wait().
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for raw in sys.stdin:
        try:
            request = json.loads(raw)
            pid = os.fork()
        except (ValueError, OSError) as exc:
            print(json.dumps({"error": str(exc)}), flush=True)
            continue
        if pid == 0:
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    main()
