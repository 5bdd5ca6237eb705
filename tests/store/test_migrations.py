"""The migrations build exactly the schema the models declare, and the newest one goes down and
up again, on SQLite and (on that run) PostgreSQL."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from loom.store.db import Database, migrate
from loom.store.tables import Base


def differences(db: Database) -> list[object]:
    with db.engine.connect() as connection:
        context = MigrationContext.configure(connection)
        found: list[object] = compare_metadata(context, Base.metadata)
        return found


def test_migrated_schema_is_the_models_schema(db: Database) -> None:
    assert differences(db) == []


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
    columns = [c["name"] for c in inspect(db.engine).get_columns("deployments")]
    assert "monitoring" not in columns and "gpus_per_replica" in columns
    assert "drift_windows" not in inspect(db.engine).get_table_names()
    migrate(db.engine)
    assert differences(db) == []
