"""The database: engine set-up (SQLite in WAL mode, or PostgreSQL) and migrations."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import DataError
from sqlalchemy.orm import Session, sessionmaker

from loom.domain.errors import NUL_WHY, InvalidInput

MIGRATIONS = Path(__file__).parent / "migrations"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA cache_size=-65536")  # 64 MiB: ingestion keeps indexes hot
    cursor.close()


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 10},
            hide_parameters=True,  # parameters hold manifests, and manifests hold secrets
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(
        url, pool_pre_ping=True, pool_size=10, max_overflow=20, hide_parameters=True
    )


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision. An empty database gets the tables as they
    are declared, stamped with the newest revision, in one step rather than by every migration in
    turn (what the migrations build from nothing is held to be the same schema by
    tests/store/test_migrations.py); a database with tables is upgraded migration by migration."""
    from alembic import command
    from sqlalchemy import inspect

    from loom.store.tables import Base

    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        if inspect(connection).get_table_names():
            command.upgrade(config, "head")
            return
        Base.metadata.create_all(connection)
        command.stamp(config, "head")


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run the migrations up to `revision`, one by one, whatever the database holds."""
    from alembic import command

    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def _alembic_config() -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


class Database:
    """The engine and a session factory; `session()` commits on success, rolls back on error."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed if the block ends well, else rolled back. PostgreSQL refuses
        text with a NUL character in it; a value that got so far is the caller's input, and
        comes out as `InvalidInput`, not a database error."""
        try:
            with self._sessions() as session, session.begin():
                yield session
        except DataError as exc:
            if "NUL" not in str(exc.orig):
                raise
            raise InvalidInput(f"a value {NUL_WHY}") from None

    def close(self) -> None:
        self.engine.dispose()
