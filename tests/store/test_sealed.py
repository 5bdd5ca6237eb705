"""Credentials sealed in the database: keys, rotation, older jobs, and what a bad key says."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cryptography.fernet import Fernet, InvalidToken
from pydantic import SecretStr

from loom.domain.errors import SecretKeyError
from loom.store import sealed
from loom.store import users as user_rows
from loom.store.db import Database
from loom.store.secret_keys import SecretKeys, load_keys
from loom.store.tables import Job, JobSecret
from tests.conftest import sqlite_only

CREDENTIALS = {"data_stores": {"0": {"password": "pw-789"}}}


@pytest.fixture
def db(db: Database) -> Database:
    """The store's database, with a user `ada`."""
    with db.session() as session:
        user_rows.add_user(session, "ada")
    return db


def add_job(db: Database, job_id: str, manifest: dict[str, object]) -> None:
    """A job row as any version stored it, without its sealed credentials."""
    with db.session() as session:
        owner = user_rows.user_by_name(session, "ada")
        assert owner is not None
        session.add(
            Job(id=job_id, owner_id=owner.id, name="j", state="COMPLETED", manifest=json.dumps(
                manifest), code_digest="d", learners=1, cpus=1, memory=1, gpus=0,
                submitted_at=time.time())
        )  # fmt: skip


def seal(db: Database, keys: SecretKeys, job_id: str) -> None:
    add_job(db, job_id, {"name": "j"})
    with db.session() as session:
        sealed.seal_job(session, keys, job_id, CREDENTIALS)


def stored(db: Database, job_id: str) -> str:
    with db.session() as session:
        row = session.get_one(JobSecret, job_id)
        assert row.sealed is not None
        return row.sealed


def test_first_start_creates_a_private_key_file(db: Database, tmp_path: Path) -> None:
    """Without LOOM_SECRET_KEYS the first start writes one Fernet key to a 0600 file."""
    file = tmp_path / "secret.key"
    keys = sealed.open_keys(db, None, file)
    assert file.stat().st_mode & 0o777 == 0o600
    assert keys.source == str(file) and keys.count == 1
    assert sealed.open_keys(db, None, file).open(keys.seal(b"x")) == b"x"  # the same key again


def test_sealed_row_opens_only_for_its_job(db: Database) -> None:
    """A job's credentials come back as sealed; a row copied to another job does not open."""
    keys = SecretKeys.ephemeral()
    seal(db, keys, "job-a")
    add_job(db, "job-b", {"name": "j"})
    with db.session() as session:
        assert sealed.credentials_of(session, keys, "job-a") == CREDENTIALS
        session.add(JobSecret(job_id="job-b", sealed=stored(db, "job-a"), sealed_at=0.0))
    with db.session() as session, pytest.raises(SecretKeyError, match="another job"):
        sealed.credentials_of(session, keys, "job-b")


def test_rotation_reseals_every_row_and_drops_the_old_key(db: Database, tmp_path: Path) -> None:
    """After rotation every row opens with the new key file, and the old key alone opens none."""
    file = tmp_path / "secret.key"
    keys = sealed.open_keys(db, None, file)
    old = [line for line in file.read_text().splitlines() if not line.startswith("#")]
    for n in range(3):
        seal(db, keys, f"job-{n}")
    assert sealed.rotate(db, keys) == 3
    new = [line for line in file.read_text().splitlines() if not line.startswith("#")]
    assert len(new) == 1 and new != old
    for n in range(3):
        token = stored(db, f"job-{n}").encode()
        assert json.loads(Fernet(new[0]).decrypt(token))["job"] == f"job-{n}"
        with pytest.raises(InvalidToken):
            Fernet(old[0]).decrypt(token)


def test_rotation_with_environment_keys_uses_the_first(db: Database, tmp_path: Path) -> None:
    """With keys from the environment, rotation reseals with the first: the second can go."""
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    seal(db, load_keys(old, tmp_path / "unused.key", sealed_jobs=0), "job-1")
    keys = sealed.open_keys(db, SecretStr(f"{new},{old}"), tmp_path / "unused.key")
    assert sealed.rotate(db, keys) == 1
    assert sealed.open_keys(db, SecretStr(new), tmp_path / "unused.key").count == 1
    assert not (tmp_path / "unused.key").exists()  # environment keys make no file
    with pytest.raises(InvalidToken):
        Fernet(old).decrypt(stored(db, "job-1").encode())


def test_missing_key_file_with_sealed_rows_is_refused(db: Database, tmp_path: Path) -> None:
    """A lost key file is named, and no new key is made that would orphan the sealed rows."""
    file = tmp_path / "secret.key"
    seal(db, sealed.open_keys(db, None, file), "job-1")
    file.unlink()
    with pytest.raises(SecretKeyError, match=r"secret\.key is missing") as caught:
        sealed.open_keys(db, None, file)
    assert "1 job" in caught.value.message
    assert not file.exists()


def test_wrong_key_names_the_jobs_it_cannot_open(db: Database, tmp_path: Path) -> None:
    """Another key in LOOM_SECRET_KEYS is refused, naming the jobs; nothing is changed."""
    seal(db, SecretKeys.ephemeral(), "job-1")
    before = stored(db, "job-1")
    wrong = SecretStr(Fernet.generate_key().decode())
    with pytest.raises(SecretKeyError, match=r"LOOM_SECRET_KEYS do not open .* \(job-1\)"):
        sealed.open_keys(db, wrong, tmp_path / "unused.key")
    assert stored(db, "job-1") == before


@pytest.mark.parametrize("value", ["not-a-key", "", " , "])
def test_malformed_environment_key_is_named_not_shown(
    db: Database, tmp_path: Path, value: str
) -> None:
    """A malformed LOOM_SECRET_KEYS says what a key must be, without repeating the value."""
    with pytest.raises(SecretKeyError, match="LOOM_SECRET_KEYS") as caught:
        sealed.open_keys(db, SecretStr(value), tmp_path / "unused.key")
    assert "Fernet key" in caught.value.message
    assert "not-a-key" not in caught.value.message


@sqlite_only
def test_older_jobs_are_redacted_and_sealed(db: Database, tmp_path: Path) -> None:
    """A job stored with clear credentials is redacted and sealed at start; its bytes are gone."""
    manifest = {
        "name": "old",
        "data_stores": [{"id": "s", "type": "s3_datastore", "connection": {"password": "pw-old"}}],
    }
    add_job(db, "job-old", manifest)
    with db.engine.connect() as connection:  # into the database file, as an old one holds it
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    assert b"pw-old" in (tmp_path / "loom.db").read_bytes()
    keys = sealed.open_keys(db, None, tmp_path / "secret.key")
    with db.session() as session:
        job = session.get_one(Job, "job-old")
        assert json.loads(job.manifest)["data_stores"][0]["connection"] == {"password": "***"}
        found = sealed.credentials_of(session, keys, "job-old")
    assert found == {"data_stores": {"0": {"password": "pw-old"}}}
    assert sealed.seal_older_jobs(db, keys) == 0  # once
    for suffix in ("", "-wal", "-shm"):
        path = tmp_path / f"loom.db{suffix}"
        assert not path.exists() or b"pw-old" not in path.read_bytes()
