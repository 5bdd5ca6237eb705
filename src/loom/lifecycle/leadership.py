"""Which of the API servers on one database runs the lifecycle: the one holding its lease.

Every server answers every request; only the leader admits, launches and watches jobs. The lease
is renewed every third of its time. When the leader dies, another server takes the lease once it
has run out (within `ttl_s`), with a higher term, and reconciles: it finds the running learners
again. Work the lifecycle commits is fenced: its transaction first checks, with the lease's row
share-locked, that the lease is still its own in its term, so a leader that was paused past its
lease cannot admit or launch anything after another has taken over.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from loom.store import leases
from loom.store.db import Database

log = logging.getLogger("loom.lifecycle")

LIFECYCLE = "lifecycle"


class Leadership:
    def __init__(
        self,
        db: Database,
        server_id: str,
        url: str,
        ttl_s: float,
        on_gain: Callable[[], None],
        on_loss: Callable[[], None],
    ) -> None:
        self.db = db
        self.server_id = server_id
        self.url = url
        self.ttl_s = ttl_s
        self.on_gain = on_gain
        self.on_loss = on_loss
        self.term: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def leading(self) -> bool:
        return self.term is not None

    def start(self) -> None:
        self._tick()
        self._thread = threading.Thread(target=self._loop, name="leadership", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop leading and hand the lease back, so another server need not wait it out."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.term is not None:
            self.term = None
            self.on_loss()
        try:
            with self.db.session() as session:
                leases.release(session, LIFECYCLE, self.server_id)
                leases.forget_server(session, self.server_id)
        except SQLAlchemyError as exc:
            log.warning("could not hand the lifecycle lease back: %s", exc)

    def fence(self, session: Session) -> bool:
        """In the caller's transaction: may this server still act as the leader?"""
        term = self.term
        return term is not None and leases.holds(session, LIFECYCLE, self.server_id, term)

    def _loop(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            self._tick()

    def _tick(self) -> None:
        try:
            with self.db.session() as session:
                term = leases.claim(session, LIFECYCLE, self.server_id, self.ttl_s)
                leases.announce(session, self.server_id, self.url, self.ttl_s)
        except SQLAlchemyError as exc:  # cannot prove the lease is ours: act as if it were not
            log.warning("renewing the lifecycle lease failed: %s", exc)
            term = None
        if term == self.term:
            return
        if self.term is not None:
            log.warning("lost the lifecycle lease (term %s)", self.term)
            self.term = None
            self.on_loss()
        if term is not None:
            log.info("leading the lifecycle as %s (term %s)", self.server_id, term)
            self.term = term
            self.on_gain()
