"""The control plane at scale, on SQLite beside PostgreSQL, in one run on this machine.

  - the scheduler: 10,000 queued jobs of 100 users behind a full machine; the time of one
    lifecycle step (watch the running learners, decide for every queued job, write the reasons
    that changed), with nothing to start, and when one job starts and every reason behind it
    changes. The real `LifecycleManager.step()` with the in-memory launcher (no processes).
  - the history: 100,000 finished jobs of 100 users and 10 M log lines (1,000 jobs of 10,000
    lines), stored through the platform's own ingestion path; then, through the real API server
    on loopback, p50/p99 of `GET /v1/jobs` (first page, a page 50,000 jobs deep by offset and by
    cursor, one user's first page) and of a job's log page (first, last, 5,000 lines deep by
    `pos` and by `after`).

PostgreSQL is Debian's, started by `tools/pgtemp.py` with its durable defaults (fsync on).

    python bench/scale.py [--queued 10000] [--jobs 100000] [--lines 10000000] [--only sqlite]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from sqlalchemy import insert

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tools/

from peers import table
from tools.pgtemp import TempPostgres

from loom.api.paging import encode_cursor
from loom.api.platform import build_platform
from loom.domain.resources import Resources
from loom.launchers.base import LearnerStatus, Liveness
from loom.launchers.fake import FakeLauncher
from loom.settings import Settings
from loom.store import logs as log_rows
from loom.store import users as user_rows
from loom.store.db import Database
from loom.store.tables import Job, Learner

GIB = 2**30
USERS = 100
START = 1_735_689_600.0  # 2025-01-01: the history's first job; one every 5 minutes after
MANIFEST = json.dumps(
    {
        "name": "scale",
        "version": "1.0",
        "cpus": 1,
        "memory": "1GiB",
        "learners": 1,
        "framework": {"name": "python", "command": "python train.py --epochs 10"},
    }
)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def p50_p99(values: list[float]) -> str:
    return f"{ms(statistics.median(values))} / {ms(pct(values, 0.99))}"


def job_row(n: int, owner: str, state: str, at: float, code: str = "") -> dict[str, object]:
    return {
        "id": f"training-{n:07d}",
        "owner_id": owner,
        "name": "scale",
        "state": state,
        "status_message": "",
        "queue_reason": "",
        "manifest": MANIFEST,
        "code_digest": code,
        "priority": 0,
        "learners": 1,
        "cpus": 1.0,
        "memory": GIB,
        "gpus": 0,
        "attempt": 1 if state != "QUEUED" else 0,
        "halt_requested": False,
        "restart_pending": False,
        "submitted_at": at,
        "started_at": at + 1 if state != "QUEUED" else None,
        "finished_at": at + 60 if state != "QUEUED" else None,
    }


def add_users(db: Database, count: int) -> list[tuple[str, str]]:
    """`count` users, each with a token: [(id, token)]."""
    found = []
    with db.session() as session:
        for n in range(count):
            user = user_rows.add_user(session, f"user{n:03d}")
            token = user_rows.new_token()
            user_rows.add_token(session, user, token)
            found.append((user.id, token))
    return found


def add_jobs(db: Database, rows: list[dict[str, object]], batch: int = 20_000) -> None:
    for start in range(0, len(rows), batch):
        with db.session() as session:
            session.execute(insert(Job), rows[start : start + batch])


# -- the scheduler -------------------------------------------------------------------------------


def scheduler(url: str | None, home: Path, queued: int) -> dict[str, str]:
    """One lifecycle step's time over `queued` jobs behind a machine that is full."""
    launcher = FakeLauncher(Resources(cpus=4, memory=64 * GIB, gpus=0))
    settings = Settings(home=home, database_url=url, launcher="fake", isolation="off")
    platform = build_platform(settings, launcher=launcher)
    lifecycle, db = platform.lifecycle, platform.db
    platform.leadership.on_gain = lambda: None  # lead (the lease, the fence), but step by hand
    platform.leadership.start()
    users = [user_id for user_id, _ in add_users(db, USERS)]
    now = time.time() - 86_400
    running = job_row(0, users[0], "RUNNING", now)
    running.update(learners=4)
    add_jobs(db, [running])
    with db.session() as session:
        for n in range(1, 5):  # the full machine: 4 learners of 1 CPU, running
            launcher.states[f"held-{n}"] = LearnerStatus(Liveness.RUNNING, {"state": "RUNNING"})
            session.add(
                Learner(job_id=running["id"], attempt=1, learner_id=n, state="RUNNING",
                        message="", handle=f"held-{n}", devices="", started_at=now)
            )  # fmt: skip
    code = platform.artifacts.put(b"the jobs' code: stored once, as for identical submissions")
    rows = [job_row(n, users[n % USERS], "QUEUED", now + n, code) for n in range(1, queued + 1)]
    add_jobs(db, rows)
    first = timed(lifecycle.step)  # writes every job's reason: the first pass after a restart
    steady = [timed(lifecycle.step) for _ in range(30)]
    starting = []
    for _ in range(10):  # one more CPU: the head of the queue starts, every reason behind shifts
        grown = launcher.capacity()
        launcher._capacity = Resources(grown.cpus + 1, grown.memory, 0)
        starting.append(timed(lifecycle.step))
    started = sum(1 for state in launcher.states.values() if state.report == {"state": "PENDING"})
    platform.leadership.stop()
    db.close()
    assert started == 10, f"expected 10 jobs started, got {started}"
    return {
        "scheduler: first pass (every reason written)": ms(first),
        "scheduler: pass, nothing starts, p50 / p99": p50_p99(steady),
        "scheduler: pass that starts a job, p50 / p99": p50_p99(starting),
    }


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


# -- the history ---------------------------------------------------------------------------------


@contextmanager
def api_server(home: Path, url: str | None) -> Iterator[str]:
    port = 9300 + os.getpid() % 500
    env = {**os.environ, "LOOM_HOME": str(home), "LOOM_ISOLATION": "off"}
    env |= {"LOOM_RATE_PER_S": "1000000", "LOOM_RATE_BURST": "1000000"}
    if url:
        env["LOOM_DATABASE_URL"] = url
    server = subprocess.Popen(
        [sys.executable, "-m", "loom.api", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("the API server did not become ready")
        yield base
    finally:
        server.terminate()
        server.wait(30)


def fill_history(url: str, jobs: int, lines: int) -> tuple[list[str], float]:
    """`jobs` finished jobs of `USERS` users, `lines` lines over the first 1,000 of them.
    Returns the jobs with lines, and the lines ingested a second."""
    db = Database(url)
    users = add_users(db, USERS)
    rows = [
        job_row(n, users[n % USERS][0], "COMPLETED" if n % 10 else "FAILED", START + n * 300)
        for n in range(1, jobs + 1)
    ]
    add_jobs(db, rows)
    with_lines = [str(row["id"]) for row in rows[: min(1000, jobs)]]
    per_job = lines // len(with_lines)
    text = "epoch 3 step 1200 loss 0.4183 accuracy 0.8871 lr 0.001 (a typical training line)"
    began = time.perf_counter()
    for job_id in with_lines:  # the ingestion path: one batch per job, as a learner sends
        batch = [
            (job_id, 1, 1, seq, START + seq * 0.01, "stdout", text) for seq in range(1, per_job + 1)
        ]
        with db.session() as session:
            log_rows.lock_job_stream(session, job_id)
            log_rows.insert_lines(session, batch)
    rate = per_job * len(with_lines) / (time.perf_counter() - began)
    db.close()
    return with_lines, rate


def latencies(client: httpx.Client, path: Callable[[], str], runs: int) -> list[float]:
    found = []
    for _ in range(runs):
        at = path()
        start = time.perf_counter()
        answer = client.get(at)
        found.append(time.perf_counter() - start)
        assert answer.status_code == 200, (at, answer.text[:300])
    return found


def history(url: str | None, home: Path, jobs: int, lines: int, runs: int) -> dict[str, str]:
    with api_server(home, url) as base:
        db_url = url or f"sqlite:///{home / 'loom.db'}"
        with_lines, rate = fill_history(db_url, jobs, lines)
        admin = (home / "token").read_text().strip()
        deep = jobs // 2
        # What the server hands out as `next_cursor` on the page that ends at that job.
        n = jobs - deep + 1
        cursor = encode_cursor(START + n * 300, f"training-{n:07d}")
        pick = random.Random(7).choice
        per_job = lines // len(with_lines)
        out = {"history: lines stored a second (filling)": f"{rate:,.0f}"}
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {admin}"}) as client:
            latencies(client, lambda: "/v1/jobs?all=true", 20)  # warm up
            middle = [(j, line_id(client, j, per_job // 2)) for j in with_lines[:50]]
            jobs_list = "/v1/jobs?limit=50&all="
            ask = [
                ("GET /v1/jobs, everyone's, first page", jobs_list + "true"),
                (f"GET /v1/jobs, offset {deep:,}", f"{jobs_list}true&offset={deep}"),
                (f"GET /v1/jobs, cursor {deep:,} deep", f"{jobs_list}true&cursor={cursor}"),
                ("GET /v1/jobs, one user's first page", jobs_list + "false&owner={user}"),
                ("log page: first 100 lines", "/v1/jobs/{job}/logs?pagesize=100"),
                ("log page: last 100 lines", "/v1/jobs/{job}/logs?pos=-1&pagesize=100"),
                (f"log page: pos {per_job // 2:,}", f"/v1/jobs/{{job}}/logs?pos={per_job // 2}"),
                (f"log page: after line {per_job // 2:,}", "/v1/jobs/{job}/logs?after={after}"),
            ]
            for name, template in ask:

                def path(template: str = template) -> str:
                    job, after = pick(middle)
                    user = f"user{pick(range(USERS)):03d}"
                    return template.format(job=job, after=after, user=user)

                out[f"{name}, p50 / p99"] = p50_p99(latencies(client, path, runs))
        return out


def line_id(client: httpx.Client, job_id: str, pos: int) -> int:
    return int(client.get(f"/v1/jobs/{job_id}/logs?pos={pos}&pagesize=1").json()["lines"][0]["id"])


# -- the run -------------------------------------------------------------------------------------


def measure(kind: str, args: argparse.Namespace) -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix=f"loom-scale-{kind}-") as folder:
        home = Path(folder)
        if kind == "sqlite":
            found = scheduler(None, home / "scheduler", args.queued)
            return found | history(None, home / "history", args.jobs, args.lines, args.runs)
        with TempPostgres(durable=True) as pg:
            found = scheduler(pg.create_database("scheduler"), home / "scheduler", args.queued)
            url = pg.create_database("history")
            return found | history(url, home / "history", args.jobs, args.lines, args.runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--lines", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=200, help="requests per measured page")
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    kinds = [args.only] if args.only else ["sqlite", "postgres"]
    results = {kind: measure(kind, args) for kind in kinds}
    names = list(next(iter(results.values())))
    rows = [[name, *(results[kind][name] for kind in kinds)] for name in names]
    title = f"{args.queued:,} queued jobs; {args.jobs:,} finished jobs and {args.lines:,} lines"
    header = ["", *("SQLite" if k == "sqlite" else "PostgreSQL" for k in kinds)]
    print("\n" + table(title, header, rows))


if __name__ == "__main__":
    main()
