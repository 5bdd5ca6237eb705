"""Each job's credentials sealed in `job_secrets`; `jobs.manifest` holds them only as `***`.

A sealed value is a Fernet token of `{"job": id, ...credentials}`: the job id inside binds it to
its row. Statements that replace clear or old sealed values run with SQLite's `secure_delete`, and
the WAL is emptied after them, so the old bytes do not linger in the database's files.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from pydantic import SecretStr
from sqlalchemy import exists, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from loom.domain.credentials import Credentials, split
from loom.domain.errors import SecretKeyError
from loom.store.db import Database
from loom.store.secret_keys import ENV, SecretKeys, load_keys
from loom.store.tables import Job, JobSecret

_SHOWN = 5


def seal_job(session: Session, keys: SecretKeys, job_id: str, credentials: Credentials) -> None:
    """Store a job's credentials sealed (or that it has none)."""
    sealed = None
    if credentials:
        sealed = keys.seal(json.dumps({"job": job_id, **credentials}, default=str).encode())
    session.add(JobSecret(job_id=job_id, sealed=sealed, sealed_at=time.time()))


def credentials_of(session: Session, keys: SecretKeys, job_id: str) -> Credentials:
    """A job's credentials, opened; none for a job that has none."""
    row = session.get(JobSecret, job_id)
    if row is None or row.sealed is None:
        return {}
    try:
        found: Credentials = json.loads(keys.open(row.sealed))
    except SecretKeyError as exc:
        raise SecretKeyError(f"the credentials of job {job_id} cannot be opened: {exc}") from exc
    if found.pop("job", None) != job_id:
        raise SecretKeyError(f"the credentials stored for job {job_id} were sealed for another job")
    return found


def open_keys(db: Database, env: SecretStr | None, file: Path) -> SecretKeys:
    """At start: the platform's keys, checked against every sealed row; then older jobs'
    credentials are sealed too. Raises `SecretKeyError` saying what is wrong, changing nothing."""
    with db.session() as session:
        count = session.scalar(select(func.count()).where(JobSecret.sealed.is_not(None))) or 0
    keys = load_keys(None if env is None else env.get_secret_value(), file, sealed_jobs=count)
    with db.session() as session:
        _check(session, keys)
    seal_older_jobs(db, keys)
    return keys


def seal_older_jobs(db: Database, keys: SecretKeys) -> int:
    """Jobs stored before credentials were sealed: their manifests redacted, their credentials
    sealed. Returns how many jobs there were."""
    with db.session() as session, _zeroing(session):
        older = session.scalars(select(Job).where(~exists().where(JobSecret.job_id == Job.id)))
        jobs = list(older)
        for job in jobs:
            redacted, credentials = split(json.loads(job.manifest))
            job.manifest = json.dumps(redacted, default=str)
            seal_job(session, keys, job.id, credentials)
    if jobs:
        _empty_wal(db)
    return len(jobs)


def rotate(db: Database, keys: SecretKeys) -> int:
    """Reseal every stored credential with a new current key (a key file's) or the first key of
    `LOOM_SECRET_KEYS`; returns how many jobs' credentials were resealed."""
    with keys.rotation:
        with db.session() as session:
            _check(session, keys)
        keys.add_current()
        count = _reseal(db, keys, stale_only=False)
        _reseal(db, keys, stale_only=True)  # sealed meanwhile by a submission, with the old key
        keys.drop_old()
    _empty_wal(db)
    return count


def _reseal(db: Database, keys: SecretKeys, *, stale_only: bool) -> int:
    with db.session() as session, _zeroing(session):
        rows = [
            row
            for row in session.scalars(select(JobSecret).where(JobSecret.sealed.is_not(None)))
            if not (stale_only and keys.current_opens(str(row.sealed)))
        ]
        for row in rows:
            row.sealed = keys.reseal(str(row.sealed))
            row.sealed_at = time.time()
    return len(rows)


def _check(session: Session, keys: SecretKeys) -> None:
    rows = session.scalars(select(JobSecret).where(JobSecret.sealed.is_not(None)))
    bad = [row.job_id for row in rows if not keys.opens(str(row.sealed))]
    if not bad:
        return
    shown = ", ".join(bad[:_SHOWN]) + (", …" if len(bad) > _SHOWN else "")
    where = f"a line of {keys.file}" if keys.file else f"a key of {ENV}, after the current one"
    raise SecretKeyError(
        f"the keys in {keys.source} do not open the sealed credentials of {len(bad)} job(s) "
        f"({shown}): they were sealed with another key; add that key as {where}, and start again"
    )


@contextmanager
def _zeroing(session: Session) -> Iterator[None]:
    """On SQLite, what the statements inside overwrite or free is zeroed, not left in pages."""
    if session.get_bind().dialect.name != "sqlite":
        yield
        return
    connection = session.connection()
    before = connection.exec_driver_sql("PRAGMA secure_delete").scalar()
    connection.exec_driver_sql("PRAGMA secure_delete=ON")
    try:
        yield
        session.flush()
    finally:
        with suppress(SQLAlchemyError):  # a failed transaction: its connection is dropped
            connection.exec_driver_sql(f"PRAGMA secure_delete={int(before or 0)}")


def _empty_wal(db: Database) -> None:
    """Copy the WAL into the database and truncate it: the old pages it held are gone."""
    if db.dialect == "sqlite":
        with db.engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
