"""Leases in the database: which server runs the lifecycle, and which servers are alive.

Times are the database's own clock where it has one (PostgreSQL), so servers whose clocks
disagree still agree on who holds a lease.
"""

from __future__ import annotations

import time

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from loom.store.tables import Lease

SERVER_PREFIX = "server:"


def now(session: Session) -> float:
    """Seconds since the epoch by the database's clock (this machine's on SQLite)."""
    if session.get_bind().dialect.name == "postgresql":
        query = "SELECT extract(epoch from clock_timestamp())"
        return float(session.connection().exec_driver_sql(query).scalar_one())
    return time.time()


def claim(session: Session, name: str, holder: str, ttl_s: float) -> int | None:
    """Take the lease if it is free or has run out, or keep it if it is ours: its term if
    `holder` holds it now, else None. A new holder gets a higher term than any before."""
    at = now(session)
    lease = session.get(Lease, name, with_for_update=True, populate_existing=True)
    if lease is None:
        try:
            with session.begin_nested():
                session.add(
                    Lease(name=name, holder=holder, term=1, acquired_at=at, expires_at=at + ttl_s)
                )
        except IntegrityError:  # another server made it first
            return None
        return 1
    if lease.holder != holder:
        if lease.expires_at > at:
            return None
        lease.holder, lease.term, lease.acquired_at = holder, lease.term + 1, at
    lease.expires_at = at + ttl_s
    return lease.term


def holds(session: Session, name: str, holder: str, term: int) -> bool:
    """Fencing, in the caller's transaction: the lease is still `holder`'s, in `term`, and has
    not run out. The row is share-locked, so a taker waits until this transaction has ended."""
    query = select(Lease).where(Lease.name == name).with_for_update(read=True)
    lease = session.scalars(query.execution_options(populate_existing=True)).first()
    return (
        lease is not None
        and lease.holder == holder
        and lease.term == term
        and lease.expires_at > now(session)
    )


def release(session: Session, name: str, holder: str) -> None:
    """Give the lease up at once (a clean stop): another server need not wait it out."""
    lease = session.get(Lease, name, with_for_update=True)
    if lease is not None and lease.holder == holder:
        lease.expires_at = 0.0


def holder_of(session: Session, name: str) -> tuple[str, int] | None:
    """Who holds the lease and in which term, if anyone does now."""
    lease = session.get(Lease, name)
    if lease is None or lease.expires_at <= now(session):
        return None
    return lease.holder, lease.term


def announce(session: Session, server_id: str, url: str, ttl_s: float) -> None:
    """This server is alive and answers at `url` for a while."""
    at = now(session)
    lease = session.get(Lease, SERVER_PREFIX + server_id)
    if lease is None:
        session.add(
            Lease(
                name=SERVER_PREFIX + server_id,
                holder=url,
                term=0,
                acquired_at=at,
                expires_at=at + ttl_s,
            )
        )
    else:
        lease.holder, lease.expires_at = url, at + ttl_s


def live_servers(session: Session) -> list[str]:
    """The URLs of the servers alive now, the longest-running first."""
    query = (
        select(Lease)
        .where(Lease.name.startswith(SERVER_PREFIX), Lease.expires_at > now(session))
        .order_by(Lease.acquired_at)
    )
    return list(dict.fromkeys(lease.holder for lease in session.scalars(query)))


def forget_server(session: Session, server_id: str) -> None:
    lease = session.get(Lease, SERVER_PREFIX + server_id)
    if lease is not None:
        session.delete(lease)
