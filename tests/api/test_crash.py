"""Nothing lost: kill -9 of the platform while jobs run, then a restart that reconciles."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from loom.client import LoomClient
from tests.conftest import Server, eventually, make_zip, manifest, running, wait_for_state

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PRINTER = (
    "import sys, time\n"
    "n = int(sys.argv[1])\n"
    "for i in range(1, n + 1):\n"
    "    print(f'line {i}', flush=True)\n"
    "    if i % 50 == 0:\n"
    "        time.sleep(0.05)\n"
)


def all_lines(client: LoomClient, job_id: str) -> list[tuple[int, str]]:
    lines, pos = [], 1
    while True:
        page = client.logs(job_id, pos=pos, pagesize=5000)
        lines += [(line["seq"], line["line"]) for line in page]
        if len(page) < 5000:
            return lines
        pos += 5000


def stored_count(client: LoomClient, job_id: str) -> int:
    page = client.logs(job_id, pos=-1, pagesize=1)
    return page[0]["seq"] if page else 0


def test_kill9_while_running_then_restart(tmp_path: Path) -> None:
    """The job completes and every printed line is stored exactly once, in order."""
    srv = Server(tmp_path / "home").start()
    try:
        with srv.client() as client:
            job_id = client.submit(
                manifest("python printer.py 4000"), make_zip({"printer.py": PRINTER})
            )
            while stored_count(client, job_id) < 300:
                time.sleep(0.02)
        srv.kill9()
        time.sleep(1.0)  # the learner goes on printing and spooling while the platform is down
        srv.start()
        with srv.client() as client:
            job = wait_for_state(client, job_id, {"COMPLETED", "FAILED", "HALTED"}, timeout=120)
            assert job["state"] == "COMPLETED", job
            lines = all_lines(client, job_id)
    finally:
        srv.stop()
    assert [seq for seq, _ in lines] == list(range(1, 4001))
    assert [text for _, text in lines] == [f"line {i}" for i in range(1, 4001)]


def test_job_that_ends_while_the_platform_is_down(tmp_path: Path) -> None:
    """A learner that finishes (and gives up resending) during the outage is reconciled from its
    status file and spool: COMPLETED, with every line."""
    srv = Server(tmp_path / "home", LOOM_LEARNER_RETRY_S="1").start()
    try:
        with srv.client() as client:
            job_id = client.submit(
                manifest("python printer.py 1500"), make_zip({"printer.py": PRINTER})
            )
            while stored_count(client, job_id) < 100:
                time.sleep(0.02)
        srv.kill9()
        status = next((srv.home / "jobs" / job_id).rglob("status.json"))
        deadline = time.monotonic() + 60
        while '"COMPLETED"' not in status.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)  # the wrapper has exited
        srv.start()
        with srv.client() as client:
            job = wait_for_state(client, job_id, {"COMPLETED", "FAILED", "HALTED"}, timeout=60)
            assert job["state"] == "COMPLETED", job
            lines = all_lines(client, job_id)
    finally:
        srv.stop()
    assert [text for _, text in lines] == [f"line {i}" for i in range(1, 1501)]


def test_a_wrapper_told_to_stop_while_the_platform_is_gone_ends(tmp_path: Path) -> None:
    """A learner whose job ended while the platform is down retries its report for
    LOOM_LEARNER_RETRY_S (10 min here); SIGTERM ends it within its halt grace and a few seconds,
    not at the end of the retries, and the restarted platform still has every line."""
    srv = Server(tmp_path / "home", LOOM_LEARNER_RETRY_S="600", LOOM_HALT_GRACE_S="1").start()
    try:
        with srv.client() as client:
            job_id = client.submit(
                manifest("python printer.py 300"), make_zip({"printer.py": PRINTER})
            )
            while stored_count(client, job_id) < 10:
                time.sleep(0.02)
        srv.kill9()
        folder = srv.home / "jobs" / job_id
        status = next(folder.rglob("status.json"))
        eventually(lambda: '"COMPLETED"' in status.read_text(), timeout=60)
        wrapper = next(int(json.loads(p.read_text())["pid"]) for p in folder.rglob("launch.json"))
        assert running(wrapper)  # still trying to tell the platform
        os.kill(wrapper, signal.SIGTERM)
        eventually(lambda: not running(wrapper), timeout=15)
        srv.start()
        with srv.client() as client:
            job = wait_for_state(client, job_id, {"COMPLETED", "FAILED", "HALTED"}, timeout=60)
            assert job["state"] == "COMPLETED", job
            lines = all_lines(client, job_id)
    finally:
        srv.stop()
    assert [text for _, text in lines] == [f"line {i}" for i in range(1, 301)]


def test_queued_job_survives_a_restart(tmp_path: Path) -> None:
    """A job waiting in the queue is still there, and runs, after kill -9 and restart."""
    srv = Server(tmp_path / "home", LOOM_CPUS="1").start()
    try:
        with srv.client() as client:
            blocker = client.submit(manifest("sleep 3", cpus=1), make_zip({"a": ""}))
            waiting = client.submit(manifest("echo second", cpus=1), make_zip({"a": ""}))
            wait_for_state(client, blocker, {"PROCESSING"})
            job = client.job(waiting)
            assert job["state"] == "QUEUED"
            assert job["queue_reason"] == "needs 1 CPUs, 0 free"
        srv.kill9()
        srv.start()
        with srv.client() as client:
            assert wait_for_state(client, blocker, {"COMPLETED"}, timeout=60)
            assert wait_for_state(client, waiting, {"COMPLETED"}, timeout=60)
            assert [x["line"] for x in client.logs(waiting)] == ["second"]
            history = [e["state"] for e in client.job(blocker)["history"]]
    finally:
        srv.stop()
    assert history.count("PENDING") == 1  # ran once, not twice


METRIC_PRINTER = (
    "import time\n"
    "from loom import tracking\n"
    "for i in range(1, 20001):\n"
    "    print(f'line {i}', flush=True)\n"
    "    if i % 4 == 0:\n"
    "        tracking.log_metrics(step=i // 4, group='train', loss=1.0 / i)\n"
    "    if i % 200 == 0:\n"
    "        time.sleep(0.1)\n"
)


def all_points(client: LoomClient, job_id: str) -> list[int]:
    steps, pos = [], 1
    while True:
        page = client.metrics(job_id, pos=pos, pagesize=5000)["metrics"]
        steps += [p["step"] for p in page]
        if len(page) < 5000:
            return steps
        pos += 5000


def test_twenty_thousand_lines_and_five_thousand_points_survive_two_kills(tmp_path: Path) -> None:
    """The platform is killed with -9 twice while a job prints 20,000 lines and logs 5,000
    points: afterwards exactly those lines and points are stored, in order, none twice."""
    srv = Server(tmp_path / "home").start()
    try:
        with srv.client() as client:
            job_id = client.submit(
                manifest("python printer.py"), make_zip({"printer.py": METRIC_PRINTER})
            )
            for threshold in (2000, 7000):
                while stored_count(client, job_id) < threshold:
                    time.sleep(0.02)
                # killed before the platform knew the job had ended (the learner may have just
                # finished printing, under load, while the stored lines caught up)
                assert client.job(job_id)["state"] in {"PROCESSING", "STORING"}
                srv.kill9()
                time.sleep(0.5)
                srv.start()
            job = wait_for_state(client, job_id, {"COMPLETED", "FAILED", "HALTED"}, timeout=180)
            assert job["state"] == "COMPLETED", job
            lines = all_lines(client, job_id)
            steps = all_points(client, job_id)
    finally:
        srv.stop()
    assert [text for _, text in lines] == [f"line {i}" for i in range(1, 20001)]
    assert [seq for seq, _ in lines] == list(range(1, 20001))
    assert steps == list(range(1, 5001))
