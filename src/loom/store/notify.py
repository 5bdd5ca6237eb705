"""PostgreSQL's LISTEN/NOTIFY between API servers on one database: "job X has something new".

A line ingested through server A wakes a follower on server B within milliseconds. Sends are
coalesced: many batches for one job in a short while become one notification.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

import psycopg
from sqlalchemy.engine import make_url

log = logging.getLogger("loom.store")

CHANNEL = "loom_jobs"
_COALESCE_S = 0.005
_RETRY_S = 1.0


def _conninfo(url: str) -> str:
    """A libpq connection string from a SQLAlchemy URL (`postgresql+psycopg://…`)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class PgChannel:
    """`send(job_id)` from any thread; `on_message(job_id)` is called for every job named by any
    server on the database, this one included. Both run on threads of their own."""

    def __init__(self, url: str, on_message: Callable[[str], None]) -> None:
        self._conninfo = _conninfo(url)
        self._on_message = on_message
        self._pending: set[str] = set()
        self._ready = threading.Condition()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._send_loop, name="notify-send", daemon=True),
            threading.Thread(target=self._listen_loop, name="notify-listen", daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def send(self, job_id: str) -> None:
        with self._ready:
            self._pending.add(job_id)
            self._ready.notify()

    def close(self) -> None:
        self._stop.set()
        with self._ready:
            self._ready.notify()
        for thread in self._threads:
            thread.join(timeout=5)

    def _take(self) -> set[str]:
        with self._ready:
            while not self._pending and not self._stop.is_set():
                self._ready.wait()
            taken, self._pending = self._pending, set()
        return taken

    def _send_loop(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as connection:
                    while not self._stop.is_set():
                        time.sleep(_COALESCE_S)  # let a burst of batches become one message
                        for job_id in self._take():
                            connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, job_id))
            except psycopg.Error as exc:
                log.warning("notifying other servers failed, retrying: %s", exc)
                self._stop.wait(_RETRY_S)

    def _listen_loop(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    while not self._stop.is_set():
                        for message in connection.notifies(timeout=0.5):
                            with contextlib.suppress(Exception):
                                self._on_message(message.payload)
            except psycopg.Error as exc:
                log.warning("listening to other servers failed, retrying: %s", exc)
                self._stop.wait(_RETRY_S)
