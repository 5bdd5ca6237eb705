"""`python -m loom.learner.pod`: a learner in a Kubernetes pod (the learner image's entry).

The pod is one learner of an indexed gang (a batch Job's, or a TrainJob's JobSet's): its rank is
the completion index, its spec is `spec-<rank+1>.json` in the Secret's volume, its token and the
data stores' credentials come in one variable read from that Secret. Before anything else this
process takes that variable out of its environment and makes itself non-dumpable, so that the
user's command, which runs as the same uid in the same container, can read neither its
environment nor its memory (`/proc/PID/environ`, `/proc/PID/mem` and ptrace need a dumpable
process or CAP_SYS_PTRACE, which the pod drops).

The spec is moved under the pod's scratch folder (no shared disk: code, checkpoints and results
go through the API), the gang's variables are set from the pod's DNS names, and Loom's wrapper
runs the learner. Its final status is also written as the container's termination message, where
the launcher finds the outcome if the report never reached the platform.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

from loom.domain.learner_env import MPI, Gang, framework_env, hostfile
from loom.domain.states import TERMINAL_STATES
from loom.kube.objects import COORDINATOR_PORT, CREDENTIALS_ENV, LEARNER_PORT
from loom.learner.relocate import relocate
from loom.learner.wrapper import run_spec

CREDENTIALS = CREDENTIALS_ENV
TERMINATION_LOG = "/dev/termination-log"  # LOOM_POD_TERMINATION_LOG elsewhere (tests)
MESSAGE_LIMIT = 4096  # what Kubernetes keeps of a termination message
PR_SET_DUMPABLE = 4


def not_dumpable() -> bool:
    """This process' memory and environment out of reach of its own uid's other processes."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def take_credentials(environ: MutableMapping[str, str]) -> tuple[str, dict[str, Any]]:
    """The token and the data stores' secrets, removed from the environment as they are read."""
    raw = environ.pop(CREDENTIALS, "")
    if not raw:
        raise SystemExit(f"{CREDENTIALS} is not set: this pod was not started by Loom")
    found = json.loads(raw)
    return str(found.get("token", "")), dict(found.get("secrets") or {})


def gang(environ: Mapping[str, str], learners: int) -> Gang:
    """The learners' addresses: rank 0's (or the runtime's master, in a TrainJob) and each
    learner's DNS name, from the pattern the launcher gave."""
    pattern = environ.get("LOOM_POD_HOSTS", "localhost")
    hosts = tuple(pattern.replace("{index}", str(i)) for i in range(learners))
    host = environ.get("PET_MASTER_ADDR") or hosts[0]
    port = int(environ.get("PET_MASTER_PORT") or COORDINATOR_PORT)
    return Gang(host, port, (LEARNER_PORT,) * learners, hosts)


def learner_spec(environ: Mapping[str, str]) -> dict[str, Any]:
    """This pod's learner's spec, moved under its scratch folder, with its gang's variables."""
    rank = int(environ.get("JOB_COMPLETION_INDEX") or 0)
    folder = Path(environ.get("LOOM_POD_SPECS", "/etc/loom/learner"))
    spec: dict[str, Any] = json.loads((folder / f"spec-{rank + 1}.json").read_text())
    spec = relocate(spec, Path(environ.get("LOOM_POD_SCRATCH", "/scratch")))
    about = spec.get("gang") or {}
    learners = int(environ.get("LOOM_POD_LEARNERS") or 1)
    where = gang(environ, learners)
    env = dict(spec.get("env") or {})
    framework = str(about.get("framework", "custom"))
    env.update(
        framework_env(
            framework,
            where,
            rank,
            parameter_servers=int(about.get("parameter_servers", 0)),
            replicas=about.get("replicas"),
        )
    )
    gpus = int(env.get("GPU_COUNT") or 0)  # the pod sees only its own devices, from 0
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
    spec["env"] = env
    if framework.lower() in MPI:
        state = Path(spec["dirs"]["JOB_STATE_DIR"])
        state.mkdir(parents=True, exist_ok=True)
        (state / "hostfile").write_text(hostfile(where))
    return spec


def termination_message(status_file: Path, target: Path) -> bool:
    """The wrapper's last status, as Kubernetes keeps it for the launcher; whether it was a
    final one."""
    try:
        text = status_file.read_text()
        status = json.loads(text)
    except (OSError, ValueError):
        return False
    if len(text.encode()) > MESSAGE_LIMIT:  # keep the outcome, cut the message
        status["message"] = str(status.get("message", ""))[-1000:]
        text = json.dumps(status)[:MESSAGE_LIMIT]
    with contextlib.suppress(OSError):
        target.write_text(text)
    return status.get("state") in TERMINAL_STATES


def main() -> int:
    token, secrets = take_credentials(os.environ)
    not_dumpable()
    spec = learner_spec(os.environ)
    private = Path(spec["status_file"]).parent
    private.mkdir(parents=True, exist_ok=True)
    private.chmod(0o700)
    spec_file = private / "spec.json"
    spec_file.write_text(json.dumps(spec))
    try:
        code = run_spec(str(spec_file), token, secrets)
    finally:
        target = os.environ.get("LOOM_POD_TERMINATION_LOG", TERMINATION_LOG)
        told = termination_message(Path(spec["status_file"]), Path(target))
    # An outcome told (even FAILED) is this pod's work done: a non-zero exit would have a
    # TrainJob's JobSet (restartPolicy OnFailure) run the learner again in place. The outcome
    # is Loom's to act on, per gang; only a wrapper that could not tell one exits non-zero.
    return 0 if told else code


if __name__ == "__main__":
    sys.exit(main())
