"""Learners that share no disk with the platform (LOOM_LEARNER_SCRATCH_DIR): their code,
checkpoints and results move through the API, and what a wrapper sends is checked before it
changes anything."""

from __future__ import annotations

import io
import json
import os
import secrets
import stat
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loom.client import LoomClient
from loom.store import users as user_rows
from loom.store.db import Database
from tests.conftest import Server, database_free, eventually, make_zip, manifest, wait_for_state

# What moves is files; the database (SQLite or PostgreSQL) plays no part in it.
pytestmark = [pytest.mark.integration, database_free]

FINAL = {"COMPLETED", "FAILED", "HALTED"}


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[Server]:
    """A platform whose learners keep their folders under a scratch folder of their own."""
    srv = Server(
        tmp_path / "home",
        LOOM_LEARNER_SCRATCH_DIR=str(tmp_path / "scratch"),
        LOOM_LEARNER_CHECKPOINT_SYNC_S="0.5",
        LOOM_LEARNER_UPLOAD_MAX_MB="1",
    ).start()
    yield srv
    srv.stop()


def lines_of(client: LoomClient, job_id: str, attempt: int | None = None) -> list[str]:
    found = client.logs(job_id, pagesize=10_000)
    return [x["line"] for x in found if attempt is None or x["attempt"] == attempt]


def files_under(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


WRITER = (
    "import os, pathlib\n"
    "print('cwd', os.getcwd())\n"
    "print('results', os.environ['RESULT_DIR'])\n"
    "results = pathlib.Path(os.environ['RESULT_DIR'])\n"
    "(results / 'model').mkdir(exist_ok=True)\n"
    "(results / 'model' / 'weights.bin').write_bytes(b'w' * 1000)\n"
    "(results / 'notes').mkdir(exist_ok=True)\n"
    "(results / 'notes' / 'a.txt').write_text('hello')\n"
    "os.symlink('/etc/passwd', results / 'notes' / 'link')\n"
    "(pathlib.Path(os.environ['CHECKPOINT_DIR']) / 'step').write_text('7')\n"
)


def test_results_and_model_come_through_the_api(platform: Server, tmp_path: Path) -> None:
    """The job's learner works in the scratch folder; its results (a link it left aside) and
    final checkpoint reach the platform's job folder through the API, its model is registered,
    and nothing there was written by the learner itself."""
    scratch = tmp_path / "scratch"
    with platform.client() as client:
        job_id = client.submit(
            manifest("python writer.py", name="moved"), make_zip({"writer.py": WRITER})
        )
        job = wait_for_state(client, job_id, FINAL)
        assert job["state"] == "COMPLETED", job
        assert "registered model version 1" in job["status_message"]
        printed = dict(line.split(" ", 1) for line in lines_of(client, job_id))
        target = client.download(job_id, "results", tmp_path / "results.zip")
        version = client.model_version("moved", "latest")
    assert printed["cwd"].startswith(f"{scratch}/jobs/{job_id}/")
    assert printed["results"] == f"{scratch}/jobs/{job_id}/results"
    names = set(zipfile.ZipFile(target).namelist())
    assert {"model/weights.bin", "notes/a.txt", "learner-1/training-log.txt"} <= names
    assert "notes/link" not in names
    assert version["provenance"]["job_id"] == job_id
    folder = platform.home / "jobs" / job_id
    assert (folder / "checkpoints" / "step").read_text() == "7"
    kept = [p for sub in ("results", "checkpoints") for p in (folder / sub).rglob("*")]
    assert kept and all(p.lstat().st_uid == os.getuid() for p in kept)  # the platform's own
    assert not any(p.is_symlink() for p in kept)
    assert not list((folder / "learners").rglob("status.json"))  # the wrapper's are in scratch
    # The attempt has ended: what it left in the scratch folder is gone, its results are here.
    assert not (scratch / "jobs" / job_id).exists()
    assert (folder / "results" / "notes" / "a.txt").read_text() == "hello"


BIG = "import os\nopen(os.environ['RESULT_DIR'] + '/big.bin', 'wb').write({data})\n"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("bytes(3 * 2**20)", "HTTP 400, results refused: the archive unpacks to 3.0 MiB"),
        ("os.urandom(3 * 2**20)", "HTTP 413, request body is larger than the limit of 2 MiB"),
    ],
)
def test_results_the_platform_refuses_fail_the_job(
    platform: Server, data: str, reason: str
) -> None:
    """Results over the platform's limit fail the job with S303 and the platform's reason: too
    large unpacked, or a body too large to be sent at all (refused before it is)."""
    with platform.client() as client:
        job_id = client.submit(
            manifest("python big.py"), make_zip({"big.py": BIG.format(data=data)})
        )
        job = wait_for_state(client, job_id, FINAL)
    assert (job["state"], job["error_code"]) == ("FAILED", "S303"), job
    assert f"could not send the results to the platform: {reason}" in job["status_message"]


RESTARTER = (
    "import os, pathlib, sys, time\n"
    "ckpt = pathlib.Path(os.environ['CHECKPOINT_DIR'])\n"
    "for path in sorted(ckpt.iterdir()):\n"
    "    print('found', path.name, path.read_text(), flush=True)\n"
    "if os.environ['TRAINING_ATTEMPT'] == '1':\n"
    "    (ckpt / 'state.txt').write_text('from attempt 1')\n"
    "    print('saved', flush=True)\n"
    "    time.sleep(4)\n"
    "    sys.exit(1)\n"
)


def test_a_restarted_attempt_finds_the_checkpoint(platform: Server) -> None:
    """Under OnFailure, attempt 1's checkpoint reaches the platform while it runs, and attempt
    2 finds it (and one only the platform had) in its CHECKPOINT_DIR."""
    with platform.client() as client:
        job_id = client.submit(
            manifest("python restarter.py", restart_policy="OnFailure", max_restarts=1),
            make_zip({"restarter.py": RESTARTER}),
        )
        on_platform = platform.home / "jobs" / job_id / "checkpoints"
        eventually((on_platform / "state.txt").exists, timeout=30)
        assert client.job(job_id)["attempt"] == 1  # sent while it ran, not only at its end
        (on_platform / "platform-only.txt").write_text("kept by the platform")
        job = wait_for_state(client, job_id, FINAL, timeout=60)
        second = lines_of(client, job_id, attempt=2)
    assert (job["state"], job["attempt"]) == ("COMPLETED", 2), job
    assert "found state.txt from attempt 1" in second
    assert "found platform-only.txt kept by the platform" in second


EPOCHS = (
    "import os, pathlib, time\n"
    "ckpt = pathlib.Path(os.environ['CHECKPOINT_DIR']) / 'epoch.txt'\n"
    "start = int(ckpt.read_text()) if ckpt.exists() else 0\n"
    "print('start', start, flush=True)\n"
    "for epoch in range(start + 1, start + 200):\n"
    "    time.sleep(0.2)\n"
    "    (ckpt.parent / 'tmp').write_text(str(epoch))\n"
    "    os.replace(ckpt.parent / 'tmp', ckpt)\n"
    "    print('epoch', epoch, flush=True)\n"
    "    if start and epoch > start + 2:\n"
    "        break\n"
)


def test_halt_and_resume_keep_the_checkpoint(platform: Server, tmp_path: Path) -> None:
    """A halted learner's last checkpoint is sent as it stops; with its scratch folder gone (as
    on another machine), the resumed job starts from it."""
    with platform.client() as client:
        job_id = client.submit(manifest("python epochs.py"), make_zip({"epochs.py": EPOCHS}))
        eventually(lambda: "epoch 4" in lines_of(client, job_id), timeout=30)
        client.halt(job_id)
        wait_for_state(client, job_id, {"HALTED"}, timeout=30)
        # the last whole "epoch N": the learner's Python writes unbuffered, so the halt's SIGTERM
        # may land inside a print, between "epoch" and its number (a clean-clone run's last line)
        epochs = [line.split() for line in lines_of(client, job_id)]
        reached = max(int(e[1]) for e in epochs if len(e) == 2 and e[0] == "epoch")
        saved = int((platform.home / "jobs" / job_id / "checkpoints" / "epoch.txt").read_text())
        assert saved >= reached
        assert not (tmp_path / "scratch" / "jobs" / job_id).exists()  # cleaned at the halt
        client.resume(job_id)
        job = wait_for_state(client, job_id, FINAL, timeout=60)
        second = lines_of(client, job_id, attempt=2)
    assert job["state"] == "COMPLETED", job
    assert second[0] == f"start {saved}"


def zip_of(*members: tuple[str | zipfile.ZipInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


def symlink_member(name: str, target: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def job_token(server: Server, job_id: str) -> str:
    """A token scoped to the job, as its learners are given (theirs never leaves them)."""
    token = f"loom_{secrets.token_urlsafe(32)}"
    db = Database(server.database_url)
    with db.session() as session:
        admin = user_rows.user_by_name(session, "admin")
        assert admin is not None
        user_rows.add_token(session, admin, token, job_id=job_id)
    db.close()
    return token


def test_uploads_are_checked_before_anything_changes(platform: Server) -> None:
    """Unsafe, broken or oversized archives are refused with 400 and the reason, another job's
    token with 403 and a finished attempt with 409; the results stay as they were. A good
    upload merges, and a checkpoints upload removes the files it says were deleted."""
    with platform.client() as client:
        code = make_zip({"sleep.py": "import time\ntime.sleep(60)\n"})
        job_id = client.submit(manifest("python sleep.py"), code)
        other_id = client.submit(manifest("python sleep.py"), code)
        wait_for_state(client, job_id, {"PROCESSING"})
        base = f"{platform.url}/v1/learner/jobs/{job_id}"
        auth = {"Authorization": f"Bearer {job_token(platform, job_id)}"}
        http = httpx.Client(headers=auth, timeout=30)

        def put(body: bytes, what: str = "results", attempt: int = 1) -> httpx.Response:
            url = f"{base}/learners/1/{what}?attempt={attempt}"
            return http.put(url, content=body, headers={"Content-Type": "application/zip"})

        done = put(zip_of(("keep.txt", b"kept"), ("sub/b.txt", b"b")))
        assert (done.status_code, done.json()) == (200, {"files": 2, "bytes": 5, "deleted": 0})
        results = platform.home / "jobs" / job_id / "results"
        before = files_under(results)
        refusals = {
            "escapes the archive's folder": zip_of(("ok.txt", b"x"), ("../x", b"x")),
            "absolute path": zip_of(("/etc/x", b"x")),
            "symbolic link 'link'": zip_of((symlink_member("link", "/etc/passwd"), b"/etc/passwd")),
            "control character": zip_of(("bad\x01name", b"x")),
            "not a zip archive": b"this is not a zip",
            "the body is empty": b"",
            "more than the limit of 1.0 MiB (LOOM_LEARNER_UPLOAD_MAX_MB)": zip_of(
                ("small.txt", b"x"), ("big.bin", b"\0" * (2 * 2**20))
            ),
        }
        for reason, body in refusals.items():
            answer = put(body)
            assert answer.status_code == 400, (reason, answer.text)
            assert reason in answer.json()["error"], answer.json()
        assert put(zip_of(("late.txt", b"x")), attempt=2).status_code == 409
        stranger = {"Authorization": f"Bearer {job_token(platform, other_id)}"}
        assert http.put(f"{base}/learners/1/results?attempt=1", headers=stranger).status_code == 403
        assert http.get(f"{base}/code", headers=stranger).status_code == 403
        assert files_under(results) == before

        assert http.get(f"{base}/code").content == code
        assert put(zip_of(("a.pt", b"a"), ("b.pt", b"b")), "checkpoints").status_code == 200
        deleted = zip_of((".loom-deleted.json", json.dumps(["a.pt"]).encode()), ("c.pt", b"c"))
        assert put(deleted, "checkpoints").json() == {"files": 1, "bytes": 1, "deleted": 1}
        fetched = zipfile.ZipFile(io.BytesIO(http.get(f"{base}/checkpoints").content))
        assert sorted(fetched.namelist()) == ["b.pt", "c.pt"]
        client.halt(job_id)
        client.halt(other_id)
        wait_for_state(client, job_id, FINAL, timeout=30)
        assert put(zip_of(("late.txt", b"x"))).status_code in (401, 409)  # revoked, or over
        http.close()


def test_a_learner_whose_platform_is_away_keeps_its_checkpoints_for_later(
    platform: Server,
) -> None:
    """While the API is down, the learner goes on; its checkpoints are sent once it is back."""
    script = (
        "import os, pathlib, time\n"
        "ckpt = pathlib.Path(os.environ['CHECKPOINT_DIR'])\n"
        "time.sleep(1)\n"
        "(ckpt / 'during.txt').write_text('written while the platform was away')\n"
        "time.sleep(6)\n"
    )
    with platform.client() as client:
        job_id = client.submit(manifest("python away.py"), make_zip({"away.py": script}))
        wait_for_state(client, job_id, {"PROCESSING"})
    platform.stop()
    time.sleep(3)
    platform.start()
    with platform.client() as client:
        job = wait_for_state(client, job_id, FINAL, timeout=60)
    assert job["state"] == "COMPLETED", job
    saved = platform.home / "jobs" / job_id / "checkpoints" / "during.txt"
    assert saved.read_text() == "written while the platform was away"
