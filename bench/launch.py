"""The platform's own overhead on a trivial job, beside the bare command and Ray Jobs.

For `python -c "print(1)"`: the time from submission to the first log line reaching a client,
and to the job's end, median over N runs, measured in one run on this machine for
  - the bare command (a subprocess, its stdout read by this process),
  - Loom (the embedded platform: REST submit, queue, learner wrapper, log stream over SSE),
    with its learners sandboxed (bubblewrap + cgroup, the default where it can) and without
    (LOOM_ISOLATION=off): the difference is the sandbox's cost,
  - Ray Jobs (`ray job submit` to a local Ray head), in its own venv.

    python bench/launch.py [--runs 10] [--no-ray]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import peer_python, table

from loom.client import ClientError, LoomClient
from loom.client.archive import zip_folder

COMMAND = 'python -c "print(1)"'
# A whole core, so that the kernel's CPU quota (which the sandbox enforces) does not slow the
# interpreter's start: what is measured is the sandbox's own cost.
MANIFEST = f"""name: trivial
cpus: 1
memory: 64MiB
framework:
  name: python
  command: {COMMAND}
"""
RAY = ["ray[default]==2.60.0"]


def bare(runs: int) -> list[tuple[float, float]]:
    out = []
    for _ in range(runs):
        began = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", "print(1)"], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        child.stdout.readline()
        first = time.perf_counter() - began
        child.wait()
        out.append((first, time.perf_counter() - began))
    return out


def _wait_health(url: str, server: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        try:
            with LoomClient(url, None, timeout=1) as probe:
                probe.health()
            return
        except ClientError:
            if server.poll() is not None:
                raise SystemExit("the Loom server exited") from None
            time.sleep(0.1)
    raise SystemExit("the Loom server did not start")


def loom(runs: int, isolation: str = "auto") -> list[tuple[float, float]]:
    home = Path(tempfile.mkdtemp(prefix="loom-bench-"))
    port = 8600 + (os.getpid() + len(isolation)) % 300
    env = {**os.environ, "LOOM_HOME": str(home), "LOOM_ISOLATION": isolation}
    server = subprocess.Popen(
        [sys.executable, "-m", "loom.api", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    out = []
    try:
        _wait_health(url, server)
        code_dir = home / "code"
        code_dir.mkdir()
        (code_dir / "README").write_text("a trivial job\n")
        code = zip_folder(code_dir)
        with LoomClient(url, (home / "token").read_text().strip()) as client:
            for i in range(runs + 1):
                began = time.perf_counter()
                job_id = client.submit(MANIFEST, code)
                first = None
                for kind, _data in client.follow(job_id):
                    if kind == "line" and first is None:
                        first = time.perf_counter() - began
                done = time.perf_counter() - began
                if i > 0:  # the first run warms the server's imports and caches
                    out.append((first or done, done))
    finally:
        server.terminate()
        server.wait(timeout=30)
    return out


def ray_jobs(runs: int) -> list[tuple[float, float]]:
    python = peer_python("ray", RAY)
    ray = python.parent / "ray"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    subprocess.run(
        [str(ray), "start", "--head", "--include-dashboard=true", "--num-cpus=2",
         "--dashboard-port=8265", "--disable-usage-stats"],
        check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        probe = Path(__file__).resolve().parent / "ray_jobs_probe.py"
        result = subprocess.run(
            [str(python), str(probe), "http://127.0.0.1:8265", str(runs + 1)],
            check=True, env=env, capture_output=True, text=True,
        )  # fmt: skip
        rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        return [(r["first_line"], r["done"]) for r in rows[1:]]
    finally:
        subprocess.run([str(ray), "stop", "--force"], env=env, capture_output=True, check=False)


def summary(name: str, runs: list[tuple[float, float]], base: tuple[float, float]) -> list[str]:
    first = statistics.median(r[0] for r in runs)
    done = statistics.median(r[1] for r in runs)
    over = f"+{done - base[1]:.3f}" if name != "bare command" else "—"
    return [name, str(len(runs)), f"{first:.3f}", f"{done:.3f}", over]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray Jobs peer")
    args = parser.parse_args()

    measured = {
        "bare command": bare(args.runs),
        "Loom (local launcher, sandboxed)": loom(args.runs),
        "Loom (local launcher, LOOM_ISOLATION=off)": loom(args.runs, "off"),
    }
    if not args.no_ray:
        measured["Ray Jobs 2.60 (local head)"] = ray_jobs(args.runs)
    base = (
        statistics.median(r[0] for r in measured["bare command"]),
        statistics.median(r[1] for r in measured["bare command"]),
    )
    rows = [summary(name, runs, base) for name, runs in measured.items()]
    header = ["system", "runs", "submit→first line (s)", "submit→done (s)", "overhead (s)"]
    print(table(f"launch overhead of `{COMMAND}` (median)", header, rows))
    if "Ray Jobs 2.60 (local head)" in measured:
        loom_done = statistics.median(r[1] for r in measured["Loom (local launcher, sandboxed)"])
        ray_done = statistics.median(r[1] for r in measured["Ray Jobs 2.60 (local head)"])
        print(f"\nLoom is {ray_done / loom_done:.1f}x faster than Ray Jobs to a finished job")


if __name__ == "__main__":
    main()
