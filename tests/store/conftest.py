"""A migrated database for the store's tests: SQLite, or PostgreSQL on its run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loom.store.db import Database, migrate
from tests.conftest import database_url


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    found = Database(database_url(tmp_path))
    migrate(found.engine)
    yield found
    found.close()
