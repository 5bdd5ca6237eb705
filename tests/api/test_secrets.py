"""Secrets at rest, on a real platform: no credential in its files, keys that rotate and are
checked at start, and a home only its owner can read."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from loom.client import ClientError
from loom.domain.accounts import hash_token
from tests.conftest import (
    ON_POSTGRES,
    Server,
    make_zip,
    manifest,
    sqlite_only,
    stop_learners,
    wait_for_state,
)

pytestmark = [pytest.mark.integration]

FINAL = {"COMPLETED", "FAILED", "HALTED"}
MODEL = 'mkdir -p "$RESULT_DIR/model" && echo weights > "$RESULT_DIR/model/m.txt"'


def local_store(folder: Path, password: str) -> str:
    """A host-folder data store whose connection also carries a password."""
    folder.mkdir(parents=True, exist_ok=True)
    return (
        "data_stores:\n"
        "  - id: here\n"
        "    type: local\n"
        f"    connection: {{path: '{folder}', user_name: ada, password: '{password}'}}\n"
    )


def files_holding(home: Path, secret: str) -> list[Path]:
    """Every file under `home` (loom.db, its WAL and SHM included) whose bytes hold `secret`."""
    return [p for p in home.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def key_lines(home: Path) -> list[str]:
    lines = (home / "secret.key").read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def loom_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOM_HOME": str(home)}
    env.pop("LOOM_TOKEN", None)
    env.pop("LOOM_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "loom", *args], env=env, capture_output=True, text=True, check=False
    )


def tables_holding(url: str, secret: str) -> list[str]:
    """The PostgreSQL tables with a row whose text holds `secret`."""
    from sqlalchemy import inspect, text

    from loom.store.db import Database

    db = Database(url)
    try:
        with db.engine.connect() as connection:
            return [
                table
                for table in inspect(connection).get_table_names()
                if connection.execute(
                    text(f'SELECT 1 FROM "{table}" AS r WHERE r::text LIKE :s LIMIT 1'),
                    {"s": f"%{secret}%"},
                ).first()
            ]
    finally:
        db.close()


def test_database_holds_no_credential(server: Server, tmp_path: Path) -> None:
    """A job's password is in no byte of loom.db, its WAL or any file of the home, while the job,
    its manifest (as `***`) and its model's provenance are shown as before."""
    password = "pw-" + uuid.uuid4().hex
    text = manifest(MODEL, name="sealed") + local_store(tmp_path / "data", password)
    with server.client() as loom:
        job_id = loom.submit(text, make_zip({"a": ""}))
        job = wait_for_state(loom, job_id, FINAL)
        version = loom.model_version("sealed")
    assert job["state"] == "COMPLETED", job
    if ON_POSTGRES:
        assert tables_holding(server.database_url, password) == []
    else:
        assert (server.home / "loom.db-wal").exists()
    assert files_holding(server.home, password) == []
    store = job["manifest"]["data_stores"][0]
    assert store["connection"] == {"path": str(tmp_path / "data"), "user_name": "***",
                                   "password": "***"}  # fmt: skip
    assert version["provenance"]["manifest"]["data_stores"][0]["connection"]["password"] == "***"
    assert password not in json.dumps(version) + json.dumps(job)


@pytest.mark.s3
def test_job_opens_its_credentials_after_a_rotation(tmp_path: Path, s3: Any) -> None:
    """A job queued before a rotation reads its bucket and stores its results with credentials
    opened by the new key; the old key is gone and the secret is in no file of the home."""
    from tests.api.test_datastores import buckets, store_yaml

    data, results = buckets(s3, "data", "results")
    s3.client().put_object(Bucket=data, Key="a.csv", Body=b"1,2\n")
    srv = Server(tmp_path / "home", LOOM_QUOTA_JOBS="1").start()
    try:
        with srv.client() as loom:
            blocker = loom.submit(manifest("sleep 60"), make_zip({"a": ""}))
            wait_for_state(loom, blocker, {"PROCESSING"})
            store = store_yaml(s3.endpoint, s3.key, s3.secret, data, results)
            command = 'cat "$DATA_DIR/a.csv" && echo kept > "$RESULT_DIR/out.txt"'
            job_id = loom.submit(manifest(command) + store, make_zip({"a": ""}))
            assert loom.job(job_id)["state"] == "QUEUED"
            old = key_lines(srv.home)
            rotated = loom_cli(srv.home, "admin", "rotate-key")
            assert rotated.returncode == 0, rotated.stderr
            assert "resealed the credentials of 1 job(s)" in rotated.stdout
            assert len(key_lines(srv.home)) == 1 and key_lines(srv.home) != old
            loom.halt(blocker)
            job = wait_for_state(loom, job_id, FINAL, timeout=90)
            assert job["state"] == "COMPLETED", job
            assert [x["line"] for x in loom.logs(job_id)] == ["1,2"]
        assert files_holding(srv.home, s3.secret) == []
    finally:
        srv.stop()
    body = s3.client().get_object(Bucket=results, Key=f"{job_id}/out.txt")["Body"].read()
    assert body == b"kept\n"


def test_rotation_is_for_admins_and_says_what_to_do_next(server: Server) -> None:
    """A user may not rotate; the admin's answer names the key file and counts the jobs."""
    with server.client() as admin:
        bob = admin.add_user("bob")
        answer = admin.rotate_secret_key()
    assert answer["key_source"] == str(server.home / "secret.key")
    assert answer["resealed"] == 0 and "new key" in answer["message"]
    with server.client(bob["token"]) as loom, pytest.raises(ClientError) as refused:
        loom.rotate_secret_key()
    assert refused.value.status == 403


def test_missing_or_wrong_key_stops_the_server_with_a_sentence(tmp_path: Path) -> None:
    """Without its key file, or with another key, the server says so and stops, without a
    traceback; with the key back, the job and its credentials are all there."""
    srv = Server(tmp_path / "home").start()
    password = "pw-" + uuid.uuid4().hex
    with srv.client() as loom:
        job_id = loom.submit(
            manifest("true") + local_store(tmp_path / "d", password), make_zip({"a": ""})
        )
    srv.stop()
    key = srv.home / "secret.key"
    key.rename(tmp_path / "kept.key")
    with pytest.raises(RuntimeError, match="server exited"):
        Server(srv.home).start()
    assert not key.exists()
    other = Server(srv.home, LOOM_SECRET_KEYS="8uKpU8P2xhTfEelzvtdgwhOqGoy6g8oQq1Oi1sC9aCY=")
    with pytest.raises(RuntimeError, match="server exited"):
        other.start()
    said = srv.log.read_text() + other.log.read_text()
    assert f"{key} is missing" in said and f"({job_id})" in said
    assert "Traceback" not in said and password not in said
    (tmp_path / "kept.key").rename(key)
    again = Server(srv.home).start()
    try:
        with again.client() as loom:
            assert loom.job(job_id)["id"] == job_id
    finally:
        again.stop()
        stop_learners(srv.home)  # its job's learner waits for a platform that is gone


SHOWN = ("sandbox-passwd", "sandbox-group", "sandbox-hosts")


@sqlite_only
def test_home_is_private_whatever_its_mode_and_the_umask(tmp_path: Path) -> None:
    """A 0777 home, an older world-readable file in it and umask 000: after start and a job,
    every folder under the home is 0700 and every file has no group or other bits."""
    home = tmp_path / "home"
    (home / "jobs").mkdir(parents=True)
    (home / "notes.txt").write_text("old")
    for path, mode in ((home, 0o777), (home / "jobs", 0o777), (home / "notes.txt", 0o666)):
        path.chmod(mode)
    before = os.umask(0)
    try:
        srv = Server(home).start()
    finally:
        os.umask(before)
    try:
        with srv.client() as loom:
            job_id = loom.submit(manifest(MODEL), make_zip({"a": ""}))
            assert wait_for_state(loom, job_id, FINAL)["state"] == "COMPLETED"
        loose = [
            f"{p.relative_to(home)} {stat.filemode(p.lstat().st_mode)}"
            for p in [home, *home.rglob("*")]
            if not p.is_symlink()
            and p.lstat().st_mode & 0o077
            # what a sandboxed learner is shown read-only (its python shims, /etc/passwd,
            # /etc/group and /etc/hosts) sits in its wrapper's 0700 folder
            and not (p.parent.name == "bin" or p.name in ("bin", *SHOWN))
        ]
        assert loose == []
        for name in ("loom.db", "loom.db-wal", "loom.db-shm", "token", "secret.key", "server.json"):
            assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name
    finally:
        srv.stop()


@sqlite_only
def test_upgrade_seals_credentials_of_older_jobs(tmp_path: Path) -> None:
    """A database of the previous schema, with a password in a job's stored manifest, holds it
    nowhere once the upgraded platform has started, and the job is shown as before."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import text

    from loom.store.db import MIGRATIONS, Database

    home, password, token = (
        tmp_path / "home",
        "pw-" + uuid.uuid4().hex,
        "old-admin-token-" + "k" * 8 + uuid.uuid4().hex,
    )
    home.mkdir()
    db = Database(f"sqlite:///{home / 'loom.db'}")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0005")
    original = {"name": "old", "framework": {"name": "python", "command": "true"}}
    original["data_stores"] = [
        {"id": "cos", "type": "s3_datastore", "connection": {"auth_url": "http://s3",
                                                           "password": password}}
    ]  # fmt: skip
    # Rows as the 0005 schema has them (today's tables have more columns).
    rows = {
        "users": {"id": "u1", "name": "admin", "is_admin": True, "created_at": time.time()},
        "tokens": {"token_hash": hash_token(token), "user_id": "u1",
                   "created_at": time.time()},
        "jobs": {"id": "training-old", "owner_id": "u1", "name": "old", "state": "COMPLETED",
                 "error_code": None, "status_message": "", "queue_reason": "",
                 "manifest": json.dumps(original), "code_digest": "d", "priority": 0,
                 "learners": 1, "cpus": 1, "memory": 1, "gpus": 0, "attempt": 0,
                 "halt_requested": False, "restart_pending": False,
                 "submitted_at": time.time()},
    }  # fmt: skip
    with db.engine.begin() as connection:
        for table, row in rows.items():
            names = ", ".join(row)
            values = ", ".join(f":{k}" for k in row)
            connection.execute(text(f"INSERT INTO {table} ({names}) VALUES ({values})"), row)
    db.close()
    srv = Server(home, LOOM_ADMIN_TOKEN=token).start()
    try:
        with srv.client() as loom:
            shown = loom.job("training-old")["manifest"]["data_stores"][0]["connection"]
        assert shown == {"auth_url": "http://s3", "password": "***"}
        assert files_holding(home, password) == []
    finally:
        srv.stop()
