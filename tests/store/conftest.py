"""A migrated SQLite database for the store's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loom.store.db import Database, migrate


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    found = Database(f"sqlite:///{tmp_path / 'loom.db'}")
    migrate(found.engine)
    yield found
    found.close()
