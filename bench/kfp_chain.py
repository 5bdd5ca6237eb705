"""KFP on Loom: what a step of a kfp-compiled chain costs beyond its own work, beside the same
chain written in Loom's own spec, in the same run on the same platform.

    .venv/bin/python bench/kfp_chain.py [--steps 50] [--pairs 3]

Both chains pass a number down, each step adding one: the KFP one is 50 lightweight Python
components compiled by the real SDK (kfp 2.17.3, in `.venvs/kfp`), run through Loom's KFP
dialect (its steps run `kfp.dsl.executor_main` in the environment the preamble asked for,
built once before the timing); Loom's is 50 `python` steps whose script reads the last value
and writes the next. The two run one after the other, `--pairs` times, each pair in the other
order than the last (the machine's load moves); the medians are compared. "Overhead per step"
is the run's wall time less the time the steps' jobs ran (first learner start to last learner
end), divided by the steps: translating, submitting, launching, following each job and opening
the next step. Caching is off on both sides.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from ingest import start_loom  # noqa: E402
from peers import table  # noqa: E402
from tests.conftest import package_sources  # noqa: E402
from tests.dialects.kfp.pipelines import chain, compile_all  # noqa: E402

from loom.client import LoomClient  # noqa: E402
from pipelines import _seconds, _union  # noqa: E402

STEP = (
    "import json, os, sys\n"
    "out = open(os.environ['RESULT_DIR'] + '/outputs.json', 'w')\n"
    "json.dump({'x': int(sys.argv[1]) + 1}, out)\n"
)


def loom_chain(steps: int) -> dict[str, Any]:
    """The same chain in Loom's spec: each step adds one to the last one's `x`."""
    found = []
    for i in range(steps):
        given = (
            "${{ parameters.start }}" if i == 0 else f"${{{{ steps.s{i - 1}.outputs.values.x }}}}"
        )
        found.append(
            {"name": f"s{i}", "kind": "python", "script": STEP, "args": [given], "cache": False}
        )
    return {"name": f"loom-chain-{steps}", "parameters": {"start": 0}, "steps": found}


def uncached(ir_text: str) -> str:
    """The compiled chain with each task's cache off (as `enable_caching=False` would)."""
    return ir_text.replace("enableCache: true", "enableCache: false")


def measure(
    client: LoomClient, what: str, spec: Any, steps: int, last: str, start: int
) -> list[str]:
    began = time.monotonic()
    made = client.run_pipeline(spec, None, {"start": start})
    run = client.wait_pipeline_run(made["id"], timeout_s=3600, poll_s=0.2)
    wall = time.monotonic() - began
    assert run["state"] == "SUCCEEDED", run["message"]
    spans = []
    for step in run["steps"]:
        for task in step["tasks"]:
            job = client.job(task["job_id"])
            start_at, end_at = _seconds(job.get("started_at")), _seconds(job.get("finished_at"))
            if start_at is not None and end_at is not None:
                spans.append((start_at, end_at))
    busy = _union(spans)
    result = _last_value(run, last)
    assert result == start + steps, (result, start + steps)
    return [what, str(steps), f"{wall:.1f}", f"{wall / steps:.2f}", f"{busy / steps:.2f}",
            f"{(wall - busy) / steps:.2f}"]  # fmt: skip


def _last_value(run: dict[str, Any], name: str) -> Any:
    step = next(s for s in run["steps"] if s["name"] == name)
    values = step["tasks"][0]["outputs"]["values"]
    return values.get("parameters", {}).get("Output", values.get("x"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=3, help="runs of each side, alternating")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kfp-bench-"))
    compiled = uncached(compile_all({"chain": chain(args.steps)}, folder)["chain"])
    kfp_last = "add-one" if args.steps == 1 else f"add-one-{args.steps}"
    server, client, _home = start_loom(**package_sources())
    rows: list[list[str]] = []
    try:
        warm = client.run_pipeline(uncached(compile_all({"one": chain(1)}, folder)["one"]))
        client.wait_pipeline_run(warm["id"], timeout_s=1800)  # builds the kfp environment once
        for pair in range(args.pairs):  # alternating which goes first: the load moves
            start = random.randrange(10**6)
            sides = [
                lambda s=start: measure(client, "KFP IR (kfp.compiler) on Loom", compiled,
                                        args.steps, kfp_last, s),
                lambda s=start: measure(client, "Loom's own spec", loom_chain(args.steps),
                                        args.steps, f"s{args.steps - 1}", s),
            ]  # fmt: skip
            for side in sides if pair % 2 == 0 else sides[::-1]:
                rows.append([str(pair + 1), *side()])
    finally:
        server.terminate()
        server.wait(timeout=30)
    kfp = statistics.median(float(r[6]) for r in rows if r[1].startswith("KFP"))
    own = statistics.median(float(r[6]) for r in rows if not r[1].startswith("KFP"))
    header = ["pair", "pipeline", "steps", "wall s", "wall s/step", "job s/step",
              "overhead s/step"]  # fmt: skip
    title = (
        f"A {args.steps}-step chain on one Loom platform, {os.cpu_count()} cores: median "
        f"overhead per step {kfp:.2f} s (KFP IR) and {own:.2f} s (Loom's own), "
        f"{kfp / own:.2f}x"
    )
    print(table(title, header, rows))


if __name__ == "__main__":
    main()
