"""The lifecycle lease: one holder at a time, a higher term at each new holder, fencing."""

from __future__ import annotations

from loom.store import leases
from loom.store.db import Database


def claim(db: Database, holder: str, ttl_s: float = 60) -> int | None:
    with db.session() as session:
        return leases.claim(session, "lifecycle", holder, ttl_s)


def holds(db: Database, holder: str, term: int) -> bool:
    with db.session() as session:
        return leases.holds(session, "lifecycle", holder, term)


def test_one_holder_until_it_runs_out_then_a_higher_term(db: Database) -> None:
    assert claim(db, "a") == 1
    assert claim(db, "b") is None  # a holds it
    assert claim(db, "a") == 1  # renewed, same term
    assert holds(db, "a", 1) and not holds(db, "b", 1)
    assert claim(db, "a", ttl_s=-1) == 1  # a's lease has now run out
    assert not holds(db, "a", 1)  # fenced even before anyone took it
    assert claim(db, "b") == 2  # taken, in a new term
    assert not holds(db, "a", 1) and holds(db, "b", 2)
    assert claim(db, "a") is None


def test_release_hands_over_at_once(db: Database) -> None:
    assert claim(db, "a") == 1
    with db.session() as session:
        leases.release(session, "lifecycle", "b")  # not b's to give
    assert claim(db, "b") is None
    with db.session() as session:
        leases.release(session, "lifecycle", "a")
    assert claim(db, "b") == 2


def test_live_servers_are_those_announced_and_not_run_out(db: Database) -> None:
    with db.session() as session:
        leases.announce(session, "s1", "http://a:1", 60)
        leases.announce(session, "s2", "http://b:2", -1)  # already run out
        leases.announce(session, "s3", "http://c:3", 60)
    with db.session() as session:
        assert leases.live_servers(session) == ["http://a:1", "http://c:3"]
        leases.forget_server(session, "s1")
    with db.session() as session:
        assert leases.live_servers(session) == ["http://c:3"]
