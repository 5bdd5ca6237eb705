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
        assert seeded(fresh) == seeded(db) != {}
        migrate(fresh.engine)
        assert revision(fresh) == revision(db)
    finally:
        fresh.close()


def seeded(db: Database) -> dict[str, list[tuple[object, ...]]]:
    """The rows of every table that holds any in an otherwise empty database, times left out."""
    found: dict[str, list[tuple[object, ...]]] = {}
    with db.engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            columns = [c for c in table.columns if not c.name.endswith("_at")]
            rows = connection.execute(table.select().with_only_columns(*columns)).all()
            if rows:
                found[table.name] = sorted(tuple(r) for r in rows)
    return found


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


def test_runs_are_made_for_the_jobs_stored_before(db: Database) -> None:
    """Upgraded from the schema before runs, every stored job is a run with its status, its
    params and tags, and the latest value of each of its metrics."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import text

    from loom.store.db import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0021_custom_serving")
    with db.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO users (id, name, is_admin, created_at) VALUES ('u1', 'ana', false, 0)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO jobs (id, owner_id, name, state, status_message, queue_reason,"
                " manifest, code_digest, priority, learners, cpus, memory, gpus, attempt,"
                " halt_requested, restart_pending, submitted_at, finished_at) VALUES"
                " ('training-old', 'u1', 'old', 'COMPLETED', '', '', '{}', 'x', 0, 1, 1, 1, 0, 1,"
                " false, false, 10.0, 20.5)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO run_info (job_id, kind, key, value, set_at) VALUES"
                " ('training-old', 'param', 'lr', '0.1', 1.0)"
            )
        )
        for seq, step, value in ((1, 1, 0.9), (2, 2, 0.4), (3, 0, 0.1)):
            connection.execute(
                text(
                    'INSERT INTO metric_points (job_id, attempt, learner_id, seq, time, "group",'
                    " step, \"values\") VALUES ('training-old', 1, 1, :seq, 30.0, 'train', :step,"
                    " :values)"
                ),
                {"seq": seq, "step": step, "values": f'{{"loss": {value}}}'},
            )
    migrate(db.engine)
    with db.engine.connect() as connection:
        run = connection.execute(
            text(
                "SELECT status, start_time, end_time, project_id FROM runs"
                " WHERE id = 'training-old'"
            )
        ).one()
        info = connection.execute(text("SELECT run_id, key, value FROM run_info")).all()
        latest = connection.execute(
            text("SELECT key, value, step FROM run_latest_metrics WHERE run_id = 'training-old'")
        ).all()
    assert tuple(run) == ("FINISHED", 10_000, 20_500, 0)
    assert [tuple(row) for row in info] == [("training-old", "lr", "0.1")]
    assert [tuple(row) for row in latest] == [("train/loss", 0.4, 2)]
