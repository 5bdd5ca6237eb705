"""A stand-in for a Kubernetes API whose pods are real processes on this machine.

No cluster can run here. This `KubeApi` keeps the objects the launcher creates and, for each
Job, starts what its pod template says a pod runs: `python -m loom.learner.pod`, with the
template's environment (the credentials resolved from the Secret, as the kubelet would), the
Secret's spec items as files, its own scratch folder, its completion index, and no
capabilities (the pod's `drop: ALL`). Pods are reported as the API
reports them: Running, then Succeeded or Failed with the termination message the pod wrote.
Deleting a pod sends SIGTERM and, after its grace, SIGKILL. Everything else the launcher does is
the real code.

`python -m tests.launchers.kube_emulator --port N` runs a platform on it (`Server(module=…)`).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The pod's process, before it starts: no capability at all (the pod's `drop: ALL`). As root
# here it keeps its uid, which can read the interpreter under /root; without CAP_SYS_PTRACE it can
# read no non-dumpable process of that uid, as in a pod.
DROP_ALL_AND_RUN_POD = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for cap in range(64):
    libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodEmulator:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.trainjobs = False

    # -- KubeApi ---------------------------------------------------------------------------
    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        from loom.domain.errors import LaunchError

        key = (obj["kind"], obj["metadata"]["name"])
        with self.lock:
            if key in self.objects:
                raise LaunchError(f"Kubernetes could not create {key} (409): AlreadyExists")
            made = copy.deepcopy(obj)
            made["metadata"]["uid"] = f"uid-{len(self.objects)}"
            made["metadata"]["creationTimestamp"] = _stamp(time.time())
            self.objects[key] = made
        if obj["kind"] == "Job":
            self._start_pods(made)
        elif obj["kind"] == "TrainJob":  # as Trainer's JobSet would: one indexed job of nodes
            self._start_pods(_trainjob_as_job(made), trainer=True)
        return copy.deepcopy(made)

    def get(self, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        if kind in WORKLOADS:
            self._settle(kind, name)
        with self.lock:
            found = self.objects.get((kind, name))
            return copy.deepcopy(found) if found else None

    def patch(self, api_version: str, kind: str, name: str, body: dict[str, Any]) -> None:
        with self.lock:
            found = self.objects[(kind, name)]
            _merge(found, body)
            if kind in WORKLOADS and (body.get("spec") or {}).get("suspend"):
                _set_condition(found, "Suspended", "Suspended")

    def delete(self, api_version: str, kind: str, name: str, grace_s: float | None = None) -> None:
        if kind == "Pod":
            self._kill(name, 30.0 if grace_s is None else grace_s)
            return
        with self.lock:
            gone = self.objects.pop((kind, name), None)
        if gone is not None and kind in WORKLOADS:
            for pod in [p for p in self.pods if self.pods[p]["job"] == name]:
                self._kill(pod, 0.0)
                self.pods.pop(pod, None)

    def listing(self, api_version: str, kind: str, selector: str) -> list[dict[str, Any]]:
        wanted = dict(part.split("=", 1) for part in selector.split(","))
        if kind != "Pod":
            with self.lock:
                return [
                    copy.deepcopy(o)
                    for (k, _), o in self.objects.items()
                    if k == kind and _matches(o["metadata"].get("labels") or {}, wanted)
                ]
        with self.lock:
            pods = list(self.pods.values())
        return [self._pod_object(p) for p in pods if _matches(p["labels"], wanted)]

    def served(self, api_version: str, kind: str) -> bool:
        return self.trainjobs

    def nodes(self) -> list[dict[str, Any]] | None:
        return None

    def events(self, name: str) -> list[dict[str, Any]]:
        return []

    # -- the pods ----------------------------------------------------------------------------
    def _start_pods(self, job: dict[str, Any], trainer: bool = False) -> None:
        name = job["metadata"]["name"]
        template = job["spec"]["template"]
        container = template["spec"]["containers"][0]
        secret = self.objects[("Secret", name)]["stringData"]
        specs = self.root / name / "specs"
        specs.mkdir(parents=True, exist_ok=True)
        for volume in template["spec"]["volumes"]:
            for item in (volume.get("secret") or {}).get("items") or []:
                (specs / item["path"]).write_text(secret[item["key"]])
        master_port = _free_port()
        for index in range(int(job["spec"]["completions"])):
            pod = f"{name}-{index}-emu"
            folder = self.root / name / f"pod-{index}"
            (folder / "scratch").mkdir(parents=True, exist_ok=True)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
            for var in container["env"]:
                if "value" in var:
                    env[var["name"]] = var["value"]
                else:  # valueFrom secretKeyRef, resolved as the kubelet does
                    ref = var["valueFrom"]["secretKeyRef"]
                    env[var["name"]] = self.objects[("Secret", ref["name"])]["stringData"][
                        ref["key"]
                    ]
            env.update(
                JOB_COMPLETION_INDEX=str(index),
                LOOM_POD_SPECS=str(specs),
                LOOM_POD_SCRATCH=str(folder / "scratch"),
                LOOM_POD_TERMINATION_LOG=str(folder / "termination-log"),
                LOOM_POD_HOSTS="127.0.0.1",  # no cluster DNS here: the gang is on loopback
                PET_MASTER_PORT=str(master_port),
                **({"PET_MASTER_ADDR": "127.0.0.1"} if trainer else {}),  # torch's runtime
                HOME=str(folder / "scratch"),
                PYTHONPATH=os.pathsep.join(sys.path),
            )
            log = (folder / "container.log").open("wb")
            process = subprocess.Popen(
                # the template's command, `python` being this interpreter
                [sys.executable, "-c", DROP_ALL_AND_RUN_POD, *container["command"][1:]],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=folder / "scratch",
            )
            with self.lock:
                self.pods[pod] = {
                    "name": pod,
                    "job": name,
                    "index": index,
                    "process": process,
                    "labels": {
                        **template["metadata"]["labels"],
                        "batch.kubernetes.io/job-completion-index": str(index),
                    },
                    "created": time.time(),
                    "termination": folder / "termination-log",
                }

    def _pod_object(self, pod: dict[str, Any]) -> dict[str, Any]:
        process: subprocess.Popen[bytes] = pod["process"]
        code = process.poll()
        state: dict[str, Any]
        if code is None:
            phase, state = "Running", {"running": {"startedAt": _stamp(pod["created"])}}
        else:
            path: Path = pod["termination"]
            message = path.read_text() if path.exists() else ""
            exit_code = code if code >= 0 else 128 - code
            phase = "Succeeded" if exit_code == 0 else "Failed"
            reason = "Completed" if exit_code == 0 else "Error"
            state = {"terminated": {"exitCode": exit_code, "reason": reason, "message": message}}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod["name"],
                "labels": dict(pod["labels"]),
                "creationTimestamp": _stamp(pod["created"]),
            },
            "spec": {"nodeName": "this-machine"},
            "status": {
                "phase": phase,
                "containerStatuses": [{"name": "learner", "image": "loom-learner", "state": state}],
            },
        }

    def _kill(self, name: str, grace_s: float) -> None:
        with self.lock:
            pod = self.pods.get(name)
        if pod is None:
            return
        process: subprocess.Popen[bytes] = pod["process"]
        if process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)

        def later() -> None:
            try:
                process.wait(timeout=max(grace_s, 0.0))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)

        threading.Thread(target=later, daemon=True).start()

    def _settle(self, kind: str, name: str) -> None:
        """A Job whose pods have all ended is Complete, or Failed at the first failure
        (its podFailurePolicy), which stops the others as Kubernetes does."""
        with self.lock:
            job = self.objects.get((kind, name))
            pods = [p for p in self.pods.values() if p["job"] == name]
        if job is None:
            return
        codes = [p["process"].poll() for p in pods]
        if any(code not in (None, 0) for code in codes):
            with self.lock:
                _set_condition(job, "Failed", "PodFailurePolicy")
            for pod in pods:
                self._kill(pod["name"], 30.0)
        elif pods and all(code == 0 for code in codes):
            with self.lock:
                _set_condition(job, "Complete", "CompletionsReached")

    def close(self) -> None:
        for name in list(self.pods):
            self._kill(name, 0.0)
        shutil.rmtree(self.root, ignore_errors=True)


WORKLOADS = ("Job", "TrainJob")


def _trainjob_as_job(trainjob: dict[str, Any]) -> dict[str, Any]:
    """The pods a TrainJob's runtime makes: the runtime patch's pod spec and labels, with the
    trainer's image, command, environment and resources in its `node` container."""
    spec = trainjob["spec"]
    patch = spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    pod = copy.deepcopy(patch["replicatedJobs"][0]["template"]["spec"]["template"])
    trainer = spec["trainer"]
    (node,) = pod["spec"]["containers"]
    node.update(
        image=trainer["image"],
        command=trainer["command"],
        env=trainer["env"],
        resources=trainer["resourcesPerNode"],
    )
    return {
        "metadata": trainjob["metadata"],
        "spec": {"completions": trainer["numNodes"], "template": pod},
    }


def _matches(labels: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in wanted.items())


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _set_condition(obj: dict[str, Any], kind: str, reason: str) -> None:
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    if not any(c["type"] == kind for c in conditions):
        conditions.append({"type": kind, "status": "True", "reason": reason, "message": ""})


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    """A platform whose launcher is the Kubernetes launcher on this emulator."""
    import argparse

    import uvicorn

    from loom.app import create_app
    from loom.kube.objects import KubeOptions
    from loom.launchers.kubernetes import KubernetesLauncher
    from loom.settings import Settings

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    os.umask(0o077)
    settings = Settings(port=args.port, launcher="kubernetes")
    emulator = PodEmulator(settings.home_dir.parent / f"{settings.home_dir.name}-pods")
    emulator.trainjobs = settings.kube_kind == "trainjob"  # a cluster with Trainer v2
    launcher = KubernetesLauncher(
        emulator, KubeOptions(halt_grace_s=settings.halt_grace_s), kind=settings.kube_kind
    )
    app = create_app(settings, launcher=launcher)
    settings.home_dir.mkdir(parents=True, exist_ok=True)
    (settings.home_dir / "server.json").write_text(json.dumps({"url": settings.api_url}))
    try:
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    finally:
        emulator.close()


if __name__ == "__main__":
    main()
