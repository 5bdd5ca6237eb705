"""The migrations build exactly the schema the models declare, and the newest one goes down and
up again, on SQLite and (on that run) PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from loom.store.db import Database, migrate, upgrade
from loom.store.tables import Base
from tests.conftest import database_url


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A database built by every migration in turn (a platform's first start creates the tables
    from their declarations in one step instead: `fresh` below)."""
    found = Database(database_url(tmp_path))
    upgrade(found.engine)
    yield found
    found.close()


def revision(db: Database) -> str | None:
    with db.engine.connect() as connection:
        found: str | None = MigrationContext.configure(connection).get_current_revision()
        return found


def differences(db: Database) -> list[object]:
    with db.engine.connect() as connection:
        context = MigrationContext.configure(connection)
        found: list[object] = compare_metadata(context, Base.metadata)
        return found


def test_migrated_schema_is_the_models_schema(db: Database) -> None:
    """Every migration from nothing builds the schema the tables declare."""
    assert differences(db) == []


def test_a_fresh_database_is_created_at_the_newest_revision(tmp_path: Path, db: Database) -> None:
    """`migrate` on an empty database creates the declared tables and stamps the newest
    revision, the one every migration in turn reaches; migrating again changes nothing."""
    fresh = Database(database_url(tmp_path / "fresh"))
    try:
        migrate(fresh.engine)
        assert differences(fresh) == []
        assert revision(fresh) == revision(db) is not None
        migrate(fresh.engine)
        assert revision(fresh) == revision(db)
    finally:
        fresh.close()


def test_job_listings_have_their_keyset_indexes(db: Database) -> None:
    indexes = {i["name"]: i["column_names"] for i in inspect(db.engine).get_indexes("jobs")}
    assert indexes["ix_jobs_owner_id_submitted_at"] == ["owner_id", "submitted_at", "id"]
    assert indexes["ix_jobs_state_submitted_at"] == ["state", "submitted_at", "id"]
    assert "ix_jobs_submitted_at" not in indexes  # a prefix of the composite, dropped


def test_the_queue_has_its_own_partial_index(db: Database) -> None:
    (queue,) = [i for i in inspect(db.engine).get_indexes("jobs") if i["name"] == "ix_jobs_queue"]
    assert queue["column_names"] == ["priority", "submitted_at", "id"]
    dialect = queue.get("dialect_options", {})
    assert "QUEUED" in str(dialect.get(f"{db.engine.dialect.name}_where", ""))


def test_newest_migration_goes_down_and_up(db: Database) -> None:
    from alembic import command
    from alembic.config import Config

    from loom.store.db import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "-1")
    assert differences(db) != []  # whichever migration is newest, it undid something
    migrate(db.engine)
    assert differences(db) == []
