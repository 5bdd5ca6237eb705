"""Runs inside the Ray peer's venv: times Ray's `runtime_env` pip/uv environments, built and reused.

    python bench/ray_env_probe.py ADDRESS REQUIREMENTS MODE [--cache-dir DIR]
        [--extra-option OPT ...] [--reuse N] [--jobs N]

ADDRESS is a running head's address (e.g. 127.0.0.1:6379, from `ray start --head`) or "local"
(`ray.init(num_cpus=2, include_dashboard=False)` starts a private cluster; no reuse by a second
job then). REQUIREMENTS is a JSON list of pip requirements; MODE is pip or uv.

Measured, submit → result of `ray.get` on a trivial task that imports the requirements' modules:
  - first: the task with the runtime env when it does not exist yet in this Ray session (cold
    build: Ray creates a virtualenv — a clone of this venv — installs the packages, then starts a
    worker in it). Ray keeps built envs under <session dir>/runtime_resources/{pip,uv}/, so run
    each "first" against a freshly started head (a new session); the probe checks the dir is empty.
  - reuse_task: the same runtime env again, N times, each task on a new worker (max_calls=1).
  - reuse_job: a new driver (ray.shutdown(), ray.init(address=...)) running the same task, as a
    second job reusing the built env; only with a real ADDRESS.
  - baseline_task: the same trivial task without a runtime env, on a new worker, for scale.

Ray's defaults install with `pip install --no-cache-dir` and `uv pip install --no-cache`, so every
build downloads everything. With --cache-dir DIR the install options are replaced by ones using
DIR as pip's / uv's cache instead; run twice with the same DIR against fresh heads for a build
with the download cache warm (the options are part of Ray's env hash, so both runs hash the same).
--extra-option adds install options (e.g. --compile-bytecode for uv, which does not compile .pyc
files by default; Ray's workers do not write them either, so every worker compiles its imports).

Prints one JSON line: {"mode", "first_s", "reuse_task_s", "reuse_job_s", "baseline_task_s", ...}.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import ray

# Distributions whose top-level module is not their name with "-" → "_".
MODULES = {"python-slugify": "slugify", "scikit-learn": "sklearn", "pyyaml": "yaml",
           "pillow": "PIL", "beautifulsoup4": "bs4", "opencv-python": "cv2"}  # fmt: skip


def module_of(requirement: str) -> str:
    name = re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0].lower()
    return MODULES.get(name, name.replace("-", "_").replace(".", "_"))


def runtime_env(mode: str, packages: list[str], cache_dir: str | None, extra: list[str]) -> dict:
    if cache_dir is None and not extra:  # Ray's own defaults: no download cache
        return {mode: list(packages)}
    if mode == "pip":
        cache = ["--no-cache-dir"] if cache_dir is None else ["--cache-dir", cache_dir]
        options = ["--disable-pip-version-check", *cache, *extra]
        return {"pip": {"packages": list(packages), "pip_install_options": options}}
    cache = ["--no-cache"] if cache_dir is None else ["--cache-dir", cache_dir]
    return {"uv": {"packages": list(packages), "uv_pip_install_options": [*cache, *extra]}}


@ray.remote(max_calls=1)  # a new worker process for every task
def probe(modules: list[str]) -> dict:
    import importlib

    files = {m: getattr(importlib.import_module(m), "__file__", None) for m in modules}
    return {"prefix": sys.prefix, "files": files}


@ray.remote(max_calls=1)
def bare() -> str:
    return sys.prefix


def timed(ref_fn) -> tuple[float, object]:
    began = time.perf_counter()
    result = ray.get(ref_fn(), timeout=1800)
    return time.perf_counter() - began, result


def session_dir() -> Path:
    try:
        return Path(ray._private.worker.global_worker.node.get_session_dir_path())
    except Exception:  # a private API: fall back to the usual link
        return Path("/tmp/ray/session_latest").resolve()


def built_envs(mode: str) -> list[str]:
    root = session_dir() / "runtime_resources" / mode
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("requirements", type=json.loads)
    parser.add_argument("mode", choices=["pip", "uv"])
    parser.add_argument("--cache-dir", help="pip's/uv's download cache (default: Ray's no-cache)")
    parser.add_argument(
        "--extra-option",
        action="append",
        default=[],
        help="one more pip/uv install option, e.g. --extra-option=--compile-bytecode (repeatable)",
    )
    parser.add_argument("--reuse", type=int, default=5, help="reuse tasks")
    parser.add_argument("--jobs", type=int, default=3, help="reuse jobs (new drivers)")
    args = parser.parse_args()

    local = args.address == "local"

    def connect() -> None:
        if local:
            ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
        else:
            ray.init(address=args.address, logging_level="warning")

    modules = [module_of(r) for r in args.requirements]
    env = runtime_env(args.mode, args.requirements, args.cache_dir, args.extra_option)
    task = probe.options(runtime_env=env)

    began = time.perf_counter()
    connect()
    init_s = time.perf_counter() - began
    # Tasks without a runtime env first, so that the driver and raylet are warm; the first ones
    # may find workers Ray prestarted, the later ones start a worker each.
    baseline = [timed(bare.remote)[0] for _ in range(args.reuse)]

    before = built_envs(args.mode)
    if before:
        raise SystemExit(f"not cold: {session_dir()} already holds {args.mode} envs {before}")
    first_s, result = timed(lambda: task.remote(modules))
    prefix = result["prefix"]
    if "runtime_resources" not in prefix:
        raise SystemExit(f"the task did not run in a runtime env: sys.prefix={prefix}")
    outside = {m: f for m, f in result["files"].items() if f and not f.startswith(prefix)}
    if outside:
        raise SystemExit(f"modules imported from outside the runtime env: {outside}")
    built = built_envs(args.mode)

    reuse_task = []
    for _ in range(args.reuse):
        seconds, again = timed(lambda: task.remote(modules))
        assert again["prefix"] == prefix, (again["prefix"], prefix)
        reuse_task.append(seconds)

    reuse_job, job_init = [], []
    if not local:
        for _ in range(args.jobs):
            ray.shutdown()
            began = time.perf_counter()
            connect()
            job_init.append(time.perf_counter() - began)
            seconds, again = timed(lambda: task.remote(modules))
            assert again["prefix"] == prefix, (again["prefix"], prefix)
            reuse_job.append(seconds)
    ray.shutdown()

    r3 = lambda xs: [round(x, 3) for x in xs]  # noqa: E731
    print(json.dumps({
        "mode": args.mode,
        "requirements": args.requirements,
        "cache_dir": args.cache_dir,
        "extra_options": args.extra_option,
        "first_s": round(first_s, 3),
        "reuse_task_s": r3(reuse_task),
        "reuse_job_s": r3(reuse_job),
        "reuse_job_init_s": r3(job_init),
        "baseline_task_s": r3(baseline),
        "init_s": round(init_s, 3),
        "env": prefix,
        "built": built,
        "ray": ray.__version__,
        "python": sys.version.split()[0],
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
