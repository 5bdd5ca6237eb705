"""The deployments' supervisor and a request that creates a deployment, side by side: one
gateway per deployment, whichever of the two gets there first (no processes: the gateway's
start is replaced by a record of it)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from loom.serving.deployments import Deployments
from loom.serving.scaling import Scaling
from loom.store.db import Database, migrate
from loom.store.users import add_user


def test_the_supervisor_never_starts_a_second_gateway_beside_a_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor's pass, run while a new deployment's gateway is being started, finds it
    started (it waits for the request); it once saw the stored row with no gateway yet and
    started one of its own, and the request a second, which nothing then knew of."""
    db = Database(f"sqlite:///{tmp_path / 'loom.db'}")
    migrate(db.engine)
    with db.session() as session:
        owner = add_user(session, "owner").id
    registry = SimpleNamespace(version=lambda *_: SimpleNamespace(version=1, files=[]))
    deployments = Deployments(db, registry, tmp_path)  # type: ignore[arg-type]
    started: list[str] = []
    running: set[str] = set()
    passes: list[threading.Thread] = []

    def spawn(row: Any) -> None:
        if not started and not passes:  # the request's start: the supervisor looks meanwhile
            passes.append(threading.Thread(target=deployments.supervise))
            passes[0].start()
            passes[0].join(timeout=1.0)  # it waits for the lock (or, before, started its own)
        started.append(threading.current_thread().name)
        running.add(row.id)

    monkeypatch.setattr(deployments, "_spawn", spawn)
    monkeypatch.setattr(deployments, "_alive", lambda row, pid=None: row.id in running)
    monkeypatch.setattr(deployments, "_materialize", lambda *_: None)
    monkeypatch.setattr(deployments, "_spec", lambda *_: None)
    monkeypatch.setattr(deployments, "_sync_access", lambda *_: None)
    monkeypatch.setattr(deployments, "view", lambda row: {"name": row.name})

    deployments.create(owner, "digits", "digits", "1", Scaling(), None)
    passes[0].join(timeout=10)
    assert not passes[0].is_alive()
    assert started == [threading.current_thread().name]  # the request's gateway, alone
