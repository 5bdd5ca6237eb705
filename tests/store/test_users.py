"""Token rows: public ids, listing, revocation, cheap use tracking, and the 0006 migration."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from loom.domain.accounts import hash_token
from loom.domain.errors import InvalidInput
from loom.store import users as user_rows
from loom.store.db import Database, migrate, upgrade


def test_listing_hides_learner_and_revoked_tokens(db: Database) -> None:
    """A user's token list holds their own live tokens, not learners' or revoked ones."""
    with db.session() as session:
        ada = user_rows.add_user(session, "ada")
        kept = user_rows.add_token(session, ada, "t-kept", name="laptop")
        user_rows.add_token(session, ada, "t-job", job_id="training-1")
        gone = user_rows.add_token(session, ada, "t-gone")
        user_rows.revoke(gone, 5.0)
    with db.session() as session:
        listed = user_rows.user_tokens(session, ada.id)
        assert [t.id for t in listed] == [kept.id]
        assert listed[0].name == "laptop" and len(kept.id) == 12
        assert user_rows.user_token(session, ada.id, gone.id) is None
        found = user_rows.resolve_token(session, "t-gone")
        assert found is not None and found[1].revoked_at == 5.0


def test_last_used_is_written_at_most_once_a_minute(db: Database) -> None:
    """Touching a token within a minute of the last noted use changes nothing."""
    with db.session() as session:
        row = user_rows.add_token(session, user_rows.add_user(session, "bo"), "t")
    user_rows.touch(row, 1000.0)
    user_rows.touch(row, 1059.0)
    assert row.last_used_at == 1000.0
    user_rows.touch(row, 1060.0)
    assert row.last_used_at == 1060.0


def test_migration_gives_existing_tokens_ids(tmp_path: Path) -> None:
    """Tokens stored before the accounts migration get distinct public ids, never expire, and
    still resolve."""
    old = Database(f"sqlite:///{tmp_path / 'old.db'}")
    upgrade(old.engine, "0005")
    with old.engine.begin() as connection:
        connection.execute(
            text("INSERT INTO users (id, name, is_admin, created_at) VALUES ('u1', 'ada', 1, 0)")
        )
        for token in ("a", "b"):
            digest = hash_token(token)
            connection.execute(
                text("INSERT INTO tokens (token_hash, user_id, created_at) VALUES (:h, 'u1', 0)"),
                {"h": digest},
            )
    migrate(old.engine)
    with old.session() as session:
        rows = [user_rows.resolve_token(session, t) for t in ("a", "b")]
        assert all(r is not None and r[0].name == "ada" for r in rows)
        ids = {r[1].id for r in rows if r is not None}
        assert len(ids) == 2 and all(r[1].expires_at is None for r in rows if r is not None)
    old.close()


def test_a_nul_the_database_cannot_store_is_the_callers_error(db: Database) -> None:
    """PostgreSQL's text holds no NUL: a value with one is `InvalidInput`, nothing is stored,
    and the session after it works. SQLite stores it as it is."""
    refused = db.engine.dialect.name == "postgresql"
    try:
        with db.session() as session:
            user_rows.add_user(session, "nul\x00name")
    except InvalidInput as exc:
        assert refused and "NUL" in exc.message
    else:
        assert not refused
    with db.session() as session:
        user_rows.add_user(session, "after")
        assert user_rows.user_by_name(session, "after") is not None
        if not refused:
            assert user_rows.user_by_name(session, "nul\x00name") is not None
