"""How long the `loom` command takes to start: `--version`, `list` and `logs JOB` against a
platform of its own, beside the interpreter's bare start, the `ray` command's `--version`, and
(with --baseline-src) another checkout's `loom` run by the same interpreter, all in one run.

Each command runs `--runs` times after one warm-up run; the table gives the median wall time
and the median CPU time (user + system) of the process. On a shared machine the wall time
swings with the load; the CPU time swings less, and the ratio to the interpreter's own start
(same run) least. Then `python -X importtime` says which imports `loom list` spends its time
in (the top-level ones, cumulative).

    python bench/cli.py [--runs 10] [--baseline-src ../main/src]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import job, start_loom
from peers import table

AIM_S = 0.2
SCRIPT = "for i in range(3):\n    print('line', i)\n"


@dataclass
class Timed:
    label: str
    command: list[str]
    env: dict[str, str]
    walls: list[float]
    cpus: list[float]

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)


def once(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of `command`, which must succeed."""
    began = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        assert child.stderr is not None
        raise SystemExit(f"{' '.join(command)} failed: {child.stderr.read().decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def timed(label: str, command: list[str], env: dict[str, str], runs: int) -> Timed:
    once(command, env)  # warm the page cache and the .pyc files
    found = [once(command, env) for _ in range(runs)]
    return Timed(label, command, env, [w for w, _ in found], [c for _, c in found])


def import_profile(command: list[str], env: dict[str, str], top: int) -> list[list[str]]:
    """The top-level imports of `command` (a `python -m …` line) by cumulative time."""
    done = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = []
    for line in done.stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if found and len(found[2]) <= 2:  # the process's own imports, not their children
            rows.append((int(found[1]), found[3]))
    rows.sort(reverse=True)
    return [[name, f"{us / 1000:.1f}"] for us, name in rows[:top]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src/ to compare")
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    server, client, home = start_loom()
    try:
        job_id = job(client, home, SCRIPT)
        for kind, _data in client.follow(job_id):
            if kind == "end":
                break
        env = {
            **os.environ,
            "LOOM_URL": client.url,
            "LOOM_TOKEN": (home / "token").read_text().strip(),
            "COLUMNS": "100",
        }
        python = sys.executable
        commands = {
            "--version": ["--version"],
            "list": ["list"],
            f"logs {job_id}": ["logs", job_id],
        }
        rows = [timed("python -c pass (the interpreter's start)", [python, "-c", "pass"], env,
                      args.runs)]  # fmt: skip
        floor = rows[0]
        ray = shutil.which("ray", path=str(Path(python).parent))
        if ray:
            rows.append(timed("ray --version", [ray, "--version"], env, args.runs))
        ours = []
        for label, argv in commands.items():
            ours.append(timed(f"loom {label}", [python, "-m", "loom", *argv], env, args.runs))
        rows += ours
        if args.baseline_src:
            before = {**env, "PYTHONPATH": str(args.baseline_src.resolve())}
            for label, argv in commands.items():
                rows.append(
                    timed(f"loom {label} (baseline)", [python, "-m", "loom", *argv], before,
                          args.runs)
                )  # fmt: skip
        profile = import_profile([python, "-m", "loom", "list"], env, 10)
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)
    print(f"{os.cpu_count()} CPUs, load average at the start: {load}; {args.runs} runs each "
          "after a warm-up; CPU: user + system of the process")  # fmt: skip
    print()
    print(
        table(
            "command start (median)",
            ["command", "wall s", "CPU s", "wall ÷ interpreter", f"≤ {AIM_S} s"],
            [
                [t.label, f"{t.wall:.3f}", f"{t.cpu:.3f}", f"{t.wall / floor.wall:.1f}x",
                 ("yes" if t.wall <= AIM_S else "no") if t in ours else ""]
                for t in rows
            ],
        )
    )  # fmt: skip
    print()
    print(table("where `loom list` spends its imports (-X importtime, cumulative)",
                ["module", "ms"], profile))  # fmt: skip


if __name__ == "__main__":
    main()
