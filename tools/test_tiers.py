"""Run Loom's checks and tests in tiers, then say what ran, how long each tier took, and the
slowest tests.

    python tools/test_tiers.py check   # lint, types, import contracts, unit tests (no servers)
    python tools/test_tiers.py test    # all of the above, then every integration test on SQLite,
                                       # the browser tests, and the database's tests on PostgreSQL

`make check` and `make test` call it. Every tier runs even when an earlier one failed (a red
lint should not hide a red test); the exit status is the first failure's. Each pytest tier writes
a JUnit report under `.test-reports/`, which the summary reads.
"""

from __future__ import annotations

import argparse
import os
import resource
import runpy
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / ".test-reports"
BIN = Path(sys.executable).parent
CHECKED = ["src", "tests", "bench", "examples", "tools"]
SLOWEST = 15


def _workers(extra: int = 0) -> str:
    """pytest-xdist workers: LOOM_TEST_WORKERS, else one per core (at least two) and `extra`:
    an integration test spends part of its time waiting on the processes it started."""
    return os.environ.get("LOOM_TEST_WORKERS") or str(max(2, os.cpu_count() or 1) + extra)


def database_files() -> list[str]:
    """The files of the tests that run again on PostgreSQL (tests/tiers.py): only they are
    collected there."""
    tests: tuple[str, ...] = runpy.run_path(str(ROOT / "tests" / "tiers.py"))["DATABASE_TESTS"]
    return sorted({test.split("::")[0] for test in tests})


@dataclass
class Tier:
    name: str
    commands: list[list[str]]
    env: dict[str, str] = field(default_factory=dict)
    report: Path | None = None  # a pytest tier's JUnit file
    cwd: Path = ROOT
    beside: str | None = None  # starts at the same time as this other tier, its output after
    until: str | None = None  # may run on until this later tier ends (else until `beside` ends)


def pytest_tier(
    name: str, args: list[str], *, workers: str | None, beside: str | None = None, **env: str
) -> Tier:
    report = REPORTS / f"{name}.xml"
    command = [str(BIN / "pytest"), "-p", "no:cacheprovider", f"--junitxml={report}", "-q"]
    if workers:  # a module on one worker: its shared platform starts once; modules in the order
        # tests/conftest.py gives them (the longest first), not sorted by how many tests they hold
        command += ["-n", workers, "--dist", "loadscope", "--no-loadscope-reorder"]
    return Tier(name, [command + args], env, report, beside=beside)


def tiers(which: str) -> list[Tier]:
    static = Tier(
        "lint+types",
        [
            [str(BIN / "ruff"), "check", *CHECKED],
            [str(BIN / "ruff"), "format", "--check", *CHECKED],
            [str(BIN / "lint-imports")],
            [str(BIN / "mypy")],
        ],
        # mypy keeps one core busy and outlasts the unit tests, after which the SQLite pass
        # starts at once, not waiting for it with a core idle (~30 s)
        beside="unit",
        until="sqlite",
    )
    unit = pytest_tier("unit", ["-m", "not integration"], workers=_workers())
    if which == "check":
        return [static, unit]
    return [
        static,
        unit,
        Tier("ui-unit", [["npm", "test", "--silent"]], cwd=ROOT / "ui"),
        pytest_tier("sqlite", ["-m", "integration and not browser"], workers=_workers(1)),
        # What depends on the database, again on a throw-away PostgreSQL server; the browser
        # tests (one at a time: a page's timings want a core) at the same time.
        pytest_tier(
            "postgres",
            ["-m", "db", *database_files()],
            workers=_workers(1),
            LOOM_TEST_DB="postgres",
        ),
        pytest_tier("browser", ["-m", "browser"], workers=None, beside="postgres"),
    ]


@dataclass
class Outcome:
    tier: Tier
    seconds: float
    status: int
    counts: dict[str, int] = field(default_factory=dict)
    cpu_s: float = 0.0  # CPU time of the tier's processes (those waited for), all cores

    @property
    def cores(self) -> float:
        """How many cores the tier's waited-for processes kept busy on average. A floor, not
        the whole: a learner's wrapper leaves its spawner's tree (it outlives the platform), so
        the CPU of jobs is not counted; a tier that runs jobs can be CPU-bound below 2.0."""
        return self.cpu_s / self.seconds if self.seconds else 0.0


def environment(tier: Tier) -> dict[str, str]:
    """The tier's environment. Bytecode is written even where the shell says not to
    (PYTHONDONTWRITEBYTECODE): Loom's own modules (installed editable, so not compiled with the
    venv) and the tests' assertion-rewritten modules would otherwise be compiled again by every
    process that imports them (each xdist worker, platform, gateway and CLI call)."""
    env = {**os.environ, **tier.env}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run(tier: Tier) -> Outcome:
    print(f"\n=== {tier.name} ===", flush=True)
    began, cpu = time.monotonic(), _children_cpu()
    status = 0
    for command in tier.commands:
        env = environment(tier)
        result = subprocess.run(command, cwd=tier.cwd, env=env, check=False)
        status = status or result.returncode
    seconds = time.monotonic() - began
    return Outcome(tier, seconds, status, _counts(tier.report), _children_cpu() - cpu)


class Background:
    """A tier run in a thread, its output kept in a file and printed when it is joined. (Its
    processes' CPU is counted in the tier running when each of them ends.)"""

    def __init__(self, tier: Tier) -> None:
        self.tier = tier
        self.output = REPORTS / f"{tier.name}.log"
        self.statuses: list[int] = []
        self.began = time.monotonic()
        self.thread = threading.Thread(target=self._run, name=tier.name)
        self.thread.start()

    def _run(self) -> None:
        with self.output.open("wb") as out:
            for command in self.tier.commands:
                env = environment(self.tier)
                done = subprocess.run(
                    command, cwd=self.tier.cwd, env=env, stdout=out, stderr=out, check=False
                )
                self.statuses.append(done.returncode)

    def join(self) -> Outcome:
        self.thread.join()
        seconds = time.monotonic() - self.began  # until it was joined, at the latest
        print(f"\n=== {self.tier.name} (beside {self.tier.beside}) ===", flush=True)
        sys.stdout.write(self.output.read_text(errors="replace"))
        status = next((s for s in self.statuses if s), 0)
        return Outcome(self.tier, seconds, status, _counts(self.tier.report))


def run_all(chosen: list[Tier]) -> list[Outcome]:
    """Each tier in turn; a tier `beside` another starts with it and is joined when its `until`
    tier (or its partner) has ended, or at the end."""
    names = {t.name for t in chosen}
    outcomes: list[Outcome] = []
    running: list[tuple[Background, str]] = []
    for tier in chosen:
        if tier.beside in names:
            continue  # started with its partner
        for partner in (t for t in chosen if t.beside == tier.name):
            until = partner.until if partner.until in names else tier.name
            running.append((Background(partner), until or tier.name))
        outcomes.append(run(tier))
        for background, until in [r for r in running if r[1] == tier.name]:
            outcomes.append(background.join())
            running.remove((background, until))
    outcomes += [background.join() for background, _ in running]
    return outcomes


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _cases(report: Path | None) -> list[ElementTree.Element]:
    if report is None or not report.exists():
        return []
    return list(ElementTree.parse(report).getroot().iter("testcase"))


def _counts(report: Path | None) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for case in _cases(report):
        if case.find("skipped") is not None:
            counts["skipped"] += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            counts["failed"] += 1
        else:
            counts["passed"] += 1
    return counts


def summary(outcomes: list[Outcome], total_s: float) -> str:
    lines = ["", "=== summary ===", f"{'tier':<12} {'result':<7} {'time':>8} {'cores':>5}  tests"]
    for o in outcomes:
        counts = ", ".join(f"{n} {k}" for k, n in o.counts.items() if n) if o.counts else ""
        result = "ok" if o.status == 0 else "FAILED"
        cores = f"{o.cores:5.2f}" if o.cpu_s else "    -"
        line = f"{o.tier.name:<12} {result:<7} {_clock(o.seconds):>8} {cores}  {counts}"
        lines.append(line)
    ran = sum(sum(o.counts.values()) for o in outcomes)
    lines.append(f"{'total':<12} {'':<7} {_clock(total_s):>8}  {ran} tests")
    slow = sorted(
        (
            (
                float(case.get("time", 0)),
                o.tier.name,
                f"{case.get('classname')}::{case.get('name')}",
            )
            for o in outcomes
            for case in _cases(o.tier.report)
        ),
        reverse=True,
    )[:SLOWEST]
    if slow:
        lines += ["", f"slowest {len(slow)} (setup, call and teardown):"]
        lines += [f"{s:8.1f}s  {tier:<9} {name}" for s, tier, name in slow]
    failed = [
        f"  {o.tier.name:<9} {case.get('classname')}::{case.get('name')}"
        for o in outcomes
        for case in _cases(o.tier.report)
        if case.find("failure") is not None or case.find("error") is not None
    ]
    if failed:  # last, so that the tail of a CI log names them
        lines += ["", f"failed ({len(failed)}):", *failed]
    return "\n".join(lines)


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("which", choices=["check", "test"])
    parser.add_argument("--only", nargs="*", help="run only these tiers (by name)")
    args = parser.parse_args()
    REPORTS.mkdir(exist_ok=True)
    began = time.monotonic()
    # Loom's modules compiled once (1.5 CPU-s), before the first tier's workers each compile
    # what they import at the same time.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", "src"], cwd=ROOT, check=False
    )
    chosen = [t for t in tiers(args.which) if not args.only or t.name in args.only]
    outcomes = run_all(chosen)
    print(summary(outcomes, time.monotonic() - began), flush=True)
    return next((o.status for o in outcomes if o.status), 0)


if __name__ == "__main__":
    sys.exit(main())
