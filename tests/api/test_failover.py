"""Three API servers on one PostgreSQL: any answers, one leads the lifecycle, and killing the
leader with -9, twice, loses nothing and launches nothing twice."""

from __future__ import annotations

import socket
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from loom.client import LoomClient
from loom.store import leases
from loom.store.db import Database
from tests.conftest import Server, eventually, make_zip, manifest, postgres_server, wait_for_state

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.slow]

LINES = 150
PRINTER = (
    "import os, time\n"
    f"for i in range({LINES}):\n"
    "    print(f\"{os.environ['LEARNER_ID']} {i}\", flush=True)\n"
    "    time.sleep(0.1)\n"
)


def leader(db: Database) -> str | None:
    """The server id holding the lifecycle lease now, if any."""
    with db.session() as session:
        held = leases.holder_of(session, "lifecycle")
    return held[0] if held else None


def all_lines(client: LoomClient, job_id: str) -> list[dict[str, object]]:
    return list(client.logs(job_id, pos=1, pagesize=10_000))


def kill_the_leader(db: Database, by_id: dict[str, Server]) -> Server:
    """Kill -9 the leading server; wait for another to lead; return one that is alive."""
    by_id[leader(db) or ""].kill9()
    alive = {sid: s for sid, s in by_id.items() if s.process and s.process.poll() is None}
    eventually(lambda: leader(db) in alive, timeout=15)
    return next(iter(alive.values()))


def more_lines_arrive(server: Server, job_id: str) -> None:
    with server.client() as client:
        stored = len(all_lines(client, job_id))
        eventually(lambda: len(all_lines(client, job_id)) > stored + 10, timeout=30)


def test_leader_killed_twice_the_job_completes_once(tmp_path: Path) -> None:
    url = postgres_server().create_database()
    env = {"LOOM_DATABASE_URL": url, "LOOM_LEADER_TTL_S": "2", "LOOM_WATCHDOG_INTERVAL_S": "0.5"}
    home = tmp_path / "home"
    servers = [Server(home, **env).start() for _ in range(3)]
    by_id = {f"{socket.gethostname()}:{s.port}": s for s in servers}
    db = Database(url)
    try:
        eventually(lambda: leader(db) in by_id)
        first = by_id[leader(db) or ""]
        others = [s for s in servers if s is not first]
        with others[0].client() as client:  # submitted through a server that does not lead
            job_id = client.submit(
                manifest("python printer.py", learners=2), make_zip({"printer.py": PRINTER})
            )
            wait_for_state(client, job_id, {"PROCESSING"}, timeout=60)
            eventually(lambda: len(all_lines(client, job_id)) >= 20, timeout=30)
        for _ in range(2):  # kill the leader, twice; the job goes on
            alive = kill_the_leader(db, by_id)
            more_lines_arrive(alive, job_id)
        with alive.client() as client:
            job = wait_for_state(client, job_id, {"COMPLETED", "FAILED", "HALTED"}, timeout=90)
            lines = all_lines(client, job_id)
        assert job["state"] == "COMPLETED", job
        assert job["attempt"] == 1  # launched once: no attempt was started again
        admitted = [e for e in job["history"] if str(e["message"]).startswith("admitted")]
        assert len(admitted) == 1, job["history"]
        by_learner: dict[int, list[str]] = defaultdict(list)
        for line in lines:
            by_learner[int(str(line["learner"]))].append(str(line["line"]))
        for n in (1, 2):  # every line stored once, in order, whichever server took it
            assert by_learner[n] == [f"{n} {i}" for i in range(LINES)]
    finally:
        db.close()
        for server in servers:
            server.stop()


def test_a_point_taken_by_one_server_wakes_a_follower_on_another(tmp_path: Path) -> None:
    """LISTEN/NOTIFY: without it, a follower on B would look again only after its 15 s wait."""
    env = {"LOOM_DATABASE_URL": postgres_server().create_database()}
    home = tmp_path / "home"
    a, b = (Server(home, **env).start() for _ in range(2))
    events: list[tuple[float, str, dict[str, Any]]] = []
    try:
        with a.client() as client:
            job_id = client.submit(manifest("sleep 60"), make_zip({"a": ""}))
            wait_for_state(client, job_id, {"PROCESSING"}, timeout=60)

        def follow() -> None:
            with b.client() as follower:
                for kind, data in follower.follow(job_id, metrics=True):
                    events.append((time.monotonic(), kind, data))

        threading.Thread(target=follow, daemon=True).start()
        time.sleep(1)  # the follower has read what there was, and waits
        with a.client() as client:
            client.log_metrics(job_id, [{"seq": 1, "group": "test", "values": {"accuracy": 0.5}}])
            eventually(lambda: any(kind == "metric" for _, kind, _ in events), timeout=10)
            client.halt(job_id)
        [point] = [data for _, kind, data in events if kind == "metric"]
        assert point["values"] == {"accuracy": 0.5}
    finally:
        for server in (a, b):
            server.stop()
