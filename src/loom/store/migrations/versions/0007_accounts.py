"""accounts: token ids, names, expiry, use and revocation; users' maximum priority; audit log

Revision ID: 0007_accounts
Revises: 0006_secrets
Create Date: 2026-11-23 01:00:00.000000
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0007_accounts"
down_revision = "0006_secrets"
branch_labels = None
depends_on = None


def _name_existing_tokens() -> None:
    """Tokens made before this revision get a public id; they keep never expiring."""
    tokens = sa.table("tokens", sa.column("token_hash", sa.String), sa.column("id", sa.String))
    connection = op.get_bind()
    for (digest,) in connection.execute(sa.select(tokens.c.token_hash)).all():
        update = tokens.update().where(tokens.c.token_hash == digest)
        connection.execute(update.values(id=secrets.token_hex(6)))


def upgrade() -> None:
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("id", sa.String(length=20), nullable=True))
        batch_op.add_column(
            sa.Column("name", sa.String(length=100), server_default="", nullable=False)
        )
        batch_op.add_column(sa.Column("expires_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("last_used_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("revoked_at", sa.Float(), nullable=True))
    _name_existing_tokens()
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.alter_column("id", existing_type=sa.String(length=20), nullable=False)
        batch_op.create_unique_constraint(batch_op.f("uq_tokens_id"), ["id"])
        batch_op.create_index(batch_op.f("ix_tokens_user_id"), ["user_id"], unique=False)

    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("max_priority", sa.Integer(), nullable=True))

    op.create_table(
        "audit_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(length=100), nullable=False),
        sa.Column("action", sa.String(length=50), nullable=False),
        sa.Column("target_kind", sa.String(length=30), nullable=False),
        sa.Column("target_id", sa.String(length=200), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("client", sa.String(length=100), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_events_at"), ["at"], unique=False)
        batch_op.create_index("ix_audit_events_actor_id", ["actor", "id"], unique=False)
        batch_op.create_index("ix_audit_events_action_id", ["action", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.drop_index("ix_audit_events_action_id")
        batch_op.drop_index("ix_audit_events_actor_id")
        batch_op.drop_index(batch_op.f("ix_audit_events_at"))
    op.drop_table("audit_events")

    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("max_priority")

    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tokens_user_id"))
        batch_op.drop_constraint(batch_op.f("uq_tokens_id"), type_="unique")
        batch_op.drop_column("revoked_at")
        batch_op.drop_column("last_used_at")
        batch_op.drop_column("expires_at")
        batch_op.drop_column("name")
        batch_op.drop_column("id")
