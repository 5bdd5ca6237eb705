"""The end-to-end demo behind `make demo`.

Starts the embedded platform (API + lifecycle, state in ./.loom-demo), submits the digits example
through the REST API, follows its logs live, prints the final state and accuracy, deploys the
model the job registered and prints its predictions for a few test images beside their true
labels, then deletes the deployment and stops the platform cleanly.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from loom.client import ClientError, LoomClient
from loom.client.archive import zip_folder

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "digits-pytorch"
HOME = Path(os.environ.get("LOOM_DEMO_HOME") or ROOT / ".loom-demo")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LOOM_HOME": str(HOME)}
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


def test_images(count: int) -> tuple[Any, Any]:
    """The first test images of the example's split (same seed), never seen in training."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    _, x_test, _, y_test = train_test_split(
        x, digits.target, test_size=0.25, random_state=0, stratify=digits.target
    )
    return x_test[:count], y_test[:count]


def serve(loom: LoomClient) -> int:
    """Deploy the model the job registered and ask it about a few test images over V2."""
    version = loom.model_version("digits-cnn", "latest")
    print(f"== deploying digits-cnn version {version['version']} as 'digits'", flush=True)
    loom.deploy("digits", "digits-cnn", version["version"], min_replicas=1, max_replicas=2)
    deployment = loom.wait_deployment("digits")
    url = deployment["urls"]["v2_infer"]
    print(f"== serving version {deployment['model_version']} at {url}", flush=True)
    # The endpoint is private: a key made for this deployment (shown once) lets a client in.
    key = loom.create_deployment_key("digits", "demo")["key"]
    print("== made a deployment key; requests carry `Authorization: Bearer <key>`", flush=True)
    images, labels = test_images(12)
    request = {
        "inputs": [
            {
                "name": "image",
                "shape": list(images.shape),
                "datatype": "FP32",
                "data": images.ravel().tolist(),
            }
        ]
    }
    try:
        headers = {"Authorization": f"Bearer {key}"}
        response = httpx.post(url, json=request, headers=headers, timeout=30)
        response.raise_for_status()
        logits = response.json()["outputs"][0]
        rows = [logits["data"][i * 10 : (i + 1) * 10] for i in range(len(labels))]
        right = 0
        for i, (row, label) in enumerate(zip(rows, labels, strict=True)):
            predicted = max(range(10), key=row.__getitem__)
            right += predicted == label
            mark = "✓" if predicted == label else "✗"
            print(f"   test image {i:2d}: predicted {predicted}, true label {label}  {mark}")
        print(f"== {right} of {len(labels)} right; metrics at {deployment['urls']['metrics']}")
    finally:
        print("== deleting the deployment", flush=True)
        loom.delete_deployment("digits")
    return 0


def main() -> int:
    shutil.rmtree(HOME, ignore_errors=True)
    port = free_port()
    print(f"== starting the Loom platform on port {port} (state in {HOME})", flush=True)
    server = start_server(port)
    try:
        token = (HOME / "token").read_text().strip()
        with LoomClient(f"http://127.0.0.1:{port}", token) as loom:
            manifest = (EXAMPLE / "manifest.yml").read_bytes()
            job_id = loom.submit(manifest, zip_folder(EXAMPLE))
            print(f"== submitted {job_id}; following its logs and metrics", flush=True)
            accuracy = None
            for kind, data in loom.follow(job_id, metrics=True):
                if kind == "line":
                    print(f"   {data['line']}", flush=True)
                    found = re.search(r"test accuracy: ([0-9.]+)", data["line"])
                    accuracy = float(found.group(1)) if found else accuracy
                elif kind == "metric":
                    shown = " ".join(f"{k}={v:.4f}" for k, v in data["values"].items())
                    print(f"   ▸ {data['group']} step {data['step']}: {shown}", flush=True)
            job = loom.job(job_id)
            print(f"== {job_id} finished: {job['state']}", flush=True)
            for event in job["history"]:
                print(f"   {event['at']}  {event['state']}")
            series = loom.metrics(job_id, form="series")["series"]
            for group, names in sorted(series.items()):
                for name, line in sorted(names.items()):
                    print(
                        f"== metric {group}/{name}: {len(line['values'])} points, "
                        f"last {line['values'][-1]:.4f} at step {line['steps'][-1]}"
                    )
            if accuracy is not None:
                print(f"== test accuracy: {accuracy:.2%}")
            if job["state"] != "COMPLETED" or accuracy is None:
                return 1
            return serve(loom)
    finally:
        print("== stopping the platform", flush=True)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
