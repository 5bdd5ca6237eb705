"""The end-to-end demo behind `make demo`: the whole workflow as one pipeline run.

Starts the embedded platform (API + lifecycle, state in ./.loom-demo, kept between demos), runs
examples/workflow/pipeline.yml with examples/ as its code folder — make the data set, train three
CNN variants in parallel (one with 2 DistributedDataParallel learners), select the most accurate,
deploy it, and ask it about test images — printing the DAG's progress live, the three accuracies,
the chosen model and its predictions. A second `make demo` reuses the cached steps' results.
Then it deletes the deployment and stops the platform cleanly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loom.client import ClientError, LoomClient
from loom.client.archive import zip_folder

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = ROOT / "examples" / "workflow" / "pipeline.yml"
HOME = Path(os.environ.get("LOOM_DEMO_HOME") or ROOT / ".loom-demo")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    # The workflow's predict step calls the deployment the step before it made: a job on a
    # network of its own (LOOM_JOB_NETWORK=auto, security round 3) reaches no port of this
    # machine, deployments included, so the demo's platform gives jobs the host's network
    # (docs/security.md, "The network").
    env = {"LOOM_JOB_NETWORK": "host", **os.environ, "LOOM_HOME": str(HOME)}
    server = subprocess.Popen([sys.executable, "-m", "loom.api", "--port", str(port)], env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with LoomClient(url, None, timeout=2) as probe:
                probe.health()
            return server
        except ClientError:
            if server.poll() is not None:
                sys.exit(f"the platform exited with code {server.returncode}")
            time.sleep(0.2)
    server.terminate()
    sys.exit("the platform did not start within 60 s")


def progress(started: float) -> Callable[[dict[str, Any]], None]:
    """Prints each step's and item's new state as the run moves on."""
    seen: dict[str, str] = {}

    def show(run: dict[str, Any]) -> None:
        for step in run["steps"]:
            for key, state, what in _lines(step):
                if seen.get(key) != state:
                    seen[key] = state
                    print(f"   [{time.monotonic() - started:6.1f}s] {what}", flush=True)

    return show


def _lines(step: dict[str, Any]) -> list[tuple[str, str, str]]:
    found = [(step["name"], step["state"], f"{step['name']:8s} {step['state']}")]
    if step["message"] and step["state"] in ("SKIPPED", "FAILED"):
        found[0] = (step["name"], step["state"], f"{found[0][2]}: {step['message']}")
    for task in step["tasks"] if step["fan_out"] else []:
        item = ", ".join(f"{k} {v}" for k, v in (task["item"] or {}).items())
        what = f"  {step['name']}[{task['index']}] {item}: {task['state']}"
        found.append((f"{step['name']}[{task['index']}]", task["state"], what))
    return found


def report(loom: LoomClient, run: dict[str, Any]) -> None:
    steps = {s["name"]: s for s in run["steps"]}
    for task in steps["train"]["tasks"]:
        outputs = task["outputs"]
        accuracy = outputs.get("metrics", {}).get("accuracy")
        shown = f"{accuracy:.2%}" if accuracy is not None else "none"
        print(
            f"== variant width {task['item']['width']} ({task['item']['learners']} learner(s)): "
            f"test accuracy {shown}, model {outputs.get('model')}"
            + (" (cached)" if task["cached"] else "")
        )
    pick = steps["pick"]["tasks"][0]["outputs"] if steps["pick"]["tasks"] else {}
    if pick:
        print(f"== chosen: {pick['model']} at {pick['metrics']['accuracy']:.2%}")
    if steps["predict"]["tasks"]:
        job = steps["predict"]["tasks"][0]["job_id"]
        print(f"== the deployment's answers (step predict, job {job}):")
        for line in loom.logs(job, pagesize=1000):
            print(f"   {line['line']}")
    cached = [s["name"] for s in run["steps"] if s["cached"]]
    print(f"== run {run['id']}: {run['state']} in {run['duration_s']:.1f}s", end="")
    print(f"; cached steps: {', '.join(cached)}" if cached else "; no step was cached")


def main() -> int:
    port = free_port()
    print(f"== starting the Loom platform on port {port} (state in {HOME})", flush=True)
    server = start_server(port)
    try:
        token = (HOME / "token").read_text().strip()
        with LoomClient(f"http://127.0.0.1:{port}", token) as loom:
            made = loom.run_pipeline(PIPELINE.read_bytes(), zip_folder(PIPELINE.parent.parent))
            print(f"== started pipeline run {made['id']} ({made['name']})", flush=True)
            run = loom.wait_pipeline_run(
                made["id"], timeout_s=600, on_change=progress(time.monotonic())
            )
            report(loom, run)
            with contextlib.suppress(ClientError):
                loom.delete_deployment("digits-workflow")
                print("== deleted the deployment", flush=True)
            return 0 if run["state"] == "SUCCEEDED" else 1
    finally:
        print("== stopping the platform", flush=True)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
