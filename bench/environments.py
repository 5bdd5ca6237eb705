"""Job environments: the time to build one the first time and to reuse it, Loom beside Ray's
`runtime_env` with the same pip list, on this machine, in one run.

Loom, measured two ways:
  - the builder alone (what a learner's wrapper does before the command starts): a first build
    with uv's download cache cold (a fresh UV_CACHE_DIR), a first build with it warm (a new
    environments folder, the same cache), and reuse;
  - whole jobs through the embedded platform (submit → COMPLETED of a job that imports the
    packages): the first job (it builds), later jobs (they reuse), and the same job without an
    environment (the platform's Python), for scale.
Ray (its own venv, a head started by this script): a task with `runtime_env={"pip"|"uv": …}`
when the env does not exist yet (download cache cold: Ray's default options; warm: a cache
folder given), the same task again on a new worker, and a new driver reusing it (a second job).

    python bench/environments.py [--runs 5] [--no-ray] [--packages '["tabulate==0.9.0", …]']
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

from launch import _wait_health
from packaging.requirements import Requirement
from peers import peer_python, table

from loom.client import LoomClient
from loom.client.archive import zip_folder
from loom.environments import builder

SMALL = ["tabulate==0.9.0", "humanize==4.11.0", "termcolor==2.5.0", "toolz==1.0.0"]
RAY = ["ray[default]==2.60.0"]
HERE = Path(__file__).resolve().parent


def module_of(requirement: str) -> str:
    name = Requirement(requirement).name.lower()
    known = {"python-slugify": "slugify", "scikit-learn": "sklearn"}
    return known.get(name, name.replace("-", "_"))


def loom_builder(packages: list[str], runs: int) -> dict[str, list[float]]:
    """First builds (download cache cold, then warm) and reuses, with the builder alone."""
    work = Path(tempfile.mkdtemp(prefix="loom-envbench-"))
    cache = work / "uv-cache"
    os.environ["UV_CACHE_DIR"] = str(cache)  # the builder passes it on to uv
    found: dict[str, list[float]] = {"cold": [], "warm": [], "reuse": []}
    try:
        for kind in ("cold", "warm"):
            request = builder.Request(
                digest=f"bench-{kind}", root=work / f"envs-{kind}", packages=packages
            )
            began = time.perf_counter()
            builder.ensure(request, lambda _: None, lambda _: None).release()
            found[kind].append(time.perf_counter() - began)
        for _ in range(runs):
            began = time.perf_counter()
            builder.ensure(request, lambda _: None, lambda _: None).release()
            found["reuse"].append(time.perf_counter() - began)
    finally:
        os.environ.pop("UV_CACHE_DIR", None)
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return found


def loom_jobs(packages: list[str], runs: int) -> dict[str, list[float]]:
    """Submit → COMPLETED: the first job with the environment, later ones, and none."""
    home = Path(tempfile.mkdtemp(prefix="loom-envbench-home-"))
    port = 8900 + os.getpid() % 90
    env = {**os.environ, "LOOM_HOME": str(home)}
    server = subprocess.Popen(
        [sys.executable, "-m", "loom.api", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    imports = "; ".join(f"import {module_of(p)}" for p in packages)
    code_dir = home / "code"
    code_dir.mkdir()
    (code_dir / "check.py").write_text(imports + "\nprint('ok')\n")
    code = zip_folder(code_dir)
    listed = json.dumps(packages)
    with_env = f"name: env\ncpus: 1\nmemory: 256MiB\nframework: {{name: python, command: python check.py}}\nenvironment: {{pip: {listed}}}\n"  # noqa: E501
    without = "name: none\ncpus: 1\nmemory: 256MiB\nframework: {name: python, command: python -c 'print(1)'}\n"  # noqa: E501
    found: dict[str, list[float]] = {"first": [], "reuse": [], "none": []}
    try:
        _wait_health(url, server)
        with LoomClient(url, (home / "token").read_text().strip()) as client:
            _job(client, without, code)  # warms the server
            found["first"].append(_job(client, with_env, code))
            for _ in range(runs):  # later jobs import the packages too, as Ray's tasks do
                found["reuse"].append(_job(client, with_env, code))
                found["none"].append(_job(client, without, code))
    finally:
        server.terminate()
        server.wait(timeout=30)
        subprocess.run(["rm", "-rf", str(home)], check=False)
    return found


def _job(client: LoomClient, manifest: str, code: bytes) -> float:
    began = time.perf_counter()
    job_id = client.submit(manifest, code)
    for _kind, _data in client.follow(job_id):
        pass
    took = time.perf_counter() - began
    job = client.job(job_id)
    if job["state"] != "COMPLETED":
        raise SystemExit(f"the benchmark's job failed: {job['status_message']}")
    return took


def ray_envs(packages: list[str], mode: str, runs: int) -> dict[str, object]:
    """Ray's runtime_env, each first build on a fresh head: download cache cold, then warm."""
    python = peer_python("ray", RAY)
    ray = python.parent / "ray"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    cache = tempfile.mkdtemp(prefix="ray-envbench-cache-")
    probe = HERE / "ray_env_probe.py"
    found: dict[str, object] = {}
    try:
        for kind, extra in (
            ("cold", []),
            ("warm", ["--cache-dir", cache]),
            ("warm2", ["--cache-dir", cache]),
        ):
            subprocess.run(
                [str(ray), "start", "--head", "--num-cpus=2", "--include-dashboard=false",
                 "--disable-usage-stats", "--port=6390"],
                check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                result = subprocess.run(
                    [str(python), str(probe), "127.0.0.1:6390", json.dumps(packages), mode,
                     "--reuse", str(runs), "--jobs", str(runs), *extra],
                    check=False, env=env, capture_output=True, text=True, timeout=1800,
                )  # fmt: skip
                if result.returncode != 0:
                    raise SystemExit(f"the Ray probe failed: {result.stderr[-3000:]}")
            finally:
                subprocess.run(
                    [str(ray), "stop", "--force"], env=env, capture_output=True, check=False
                )
            rows = [json.loads(x) for x in result.stdout.splitlines() if x.startswith("{")]
            found[kind] = rows[-1]
    finally:
        subprocess.run(["rm", "-rf", cache], check=False)
    return found


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}" if values else "—"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--packages", default=json.dumps(SMALL))
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    packages = json.loads(args.packages)
    built = loom_builder(packages, args.runs)
    jobs = loom_jobs(packages, args.runs)
    rows = [
        ["Loom (uv)", "first build, download cache cold", _median(built["cold"])],
        ["Loom (uv)", "first build, download cache warm", _median(built["warm"])],
        ["Loom (uv)", "reuse, in the learner's wrapper", _median(built["reuse"])],
        ["Loom (uv)", "first job (builds, imports), submit → done", _median(jobs["first"])],
        ["Loom (uv)", "later job (reuses, imports), submit → done", _median(jobs["reuse"])],
        ["Loom", "job without an environment (prints), for scale", _median(jobs["none"])],
    ]
    if not args.no_ray:
        for mode in ("pip", "uv"):
            found = ray_envs(packages, mode, args.runs)
            cold, warm, warm2 = (found[k] for k in ("cold", "warm", "warm2"))
            name = f"Ray runtime_env ({mode})"
            rows += [
                [name, "first build, download cache cold", f"{cold['first_s']:.3f}"],  # type: ignore[index]
                [name, "first build, download cache warm", f"{warm2['first_s']:.3f}"],  # type: ignore[index]
                [name, "reuse, a task on a new worker", _median(warm2["reuse_task_s"])],  # type: ignore[index]
                [name, "reuse, a new job (driver)", _median(warm2["reuse_job_s"])],  # type: ignore[index]
                [name, "task without runtime_env, for scale", _median(warm2["baseline_task_s"])],  # type: ignore[index]
            ]
            del warm
    print(table(f"Job environments: {len(packages)} packages {packages}, seconds (median)",
                ["system", "case", "s"], rows))  # fmt: skip


if __name__ == "__main__":
    main()
