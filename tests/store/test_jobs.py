"""Listing jobs by keyset: every job once, newest first, ties on the submission time included."""

from __future__ import annotations

from pytest import MonkeyPatch

from loom.store import jobs as job_rows
from loom.store import users as user_rows
from loom.store.db import Database
from loom.store.tables import Job


def fill(db: Database, count: int) -> tuple[str, str]:
    """`count` jobs of two users, three per submission time (so times tie), every 4th FAILED."""
    with db.session() as session:
        ada, bob = user_rows.add_user(session, "ada"), user_rows.add_user(session, "bob")
        for n in range(count):
            session.add(
                Job(id=f"training-{n:04d}", owner_id=(ada if n % 2 else bob).id, name="t",
                    state="FAILED" if n % 4 == 0 else "COMPLETED", manifest="{}",
                    code_digest="x", learners=1, cpus=1, memory=1, gpus=0,
                    submitted_at=float(n // 3))
            )  # fmt: skip
        return ada.id, bob.id


def walk(db: Database, limit: int, **filters: object) -> list[str]:
    seen: list[str] = []
    after = None
    while True:
        with db.session() as session:
            page = job_rows.list_jobs(session, limit=limit, after=after, **filters)  # type: ignore[arg-type]
        seen += [job.id for job in page.jobs]
        if page.after is None:
            return seen
        after = page.after


def newest_first(ids: list[str]) -> list[str]:
    return sorted(ids, key=lambda i: (int(i.split("-")[1]) // 3, i), reverse=True)


def test_keyset_pages_visit_every_job_once_in_order(db: Database) -> None:
    fill(db, 50)
    everyone = [f"training-{n:04d}" for n in range(50)]
    for limit in (1, 2, 3, 7, 50, 500):
        assert walk(db, limit) == newest_first(everyone)


def test_keyset_pages_with_owner_and_state(db: Database) -> None:
    ada, _bob = fill(db, 50)
    adas = [f"training-{n:04d}" for n in range(50) if n % 2]
    assert walk(db, 4, owner_id=ada) == newest_first(adas)
    failed = [f"training-{n:04d}" for n in range(50) if n % 4 == 0]
    assert walk(db, 3, states=["FAILED"]) == newest_first(failed)
    with db.session() as session:
        page = job_rows.list_jobs(session, states=["FAILED"], limit=3)
    assert page.total == len(failed) and len(page.jobs) == 3


def test_the_total_is_counted_up_to_a_limit(db: Database, monkeypatch: MonkeyPatch) -> None:
    """Counting a long history costs a scan of it: the count stops past COUNT_UP_TO."""
    ada, _bob = fill(db, 50)
    monkeypatch.setattr(job_rows, "COUNT_UP_TO", 30)
    with db.session() as session:
        everyone = job_rows.list_jobs(session, limit=5)
        adas = job_rows.list_jobs(session, owner_id=ada, limit=5)
        exactly = job_rows.list_jobs(session, states=["FAILED"], limit=5)
    assert (everyone.total, everyone.total_exact) == (30, False)
    assert (adas.total, adas.total_exact) == (25, True)
    assert (exactly.total, exactly.total_exact) == (13, True)
