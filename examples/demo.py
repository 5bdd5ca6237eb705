"""The end-to-end demo behind `make demo`.

Starts the embedded platform (API + lifecycle, state in ./.loom-demo), submits the digits example
through the REST API, follows its logs live, prints the final state and accuracy, and stops the
platform cleanly.
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

from loom.client import ClientError, LoomClient
from loom.client.archive import zip_folder

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "digits-pytorch"
HOME = ROOT / ".loom-demo"


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
            return 0 if job["state"] == "COMPLETED" and accuracy is not None else 1
    finally:
        print("== stopping the platform", flush=True)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
