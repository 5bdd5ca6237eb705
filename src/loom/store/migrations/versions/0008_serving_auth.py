"""serving auth: public deployments and per-deployment keys

Revision ID: 0008_serving_auth
Revises: 0007_accounts
Create Date: 2026-12-02 10:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_serving_auth"
down_revision = "0007_accounts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments", schema=None) as batch_op:
        # existing deployments become private: their callers need a token from now on
        batch_op.add_column(sa.Column("public", sa.Boolean(), nullable=False, server_default="0"))
    op.create_table(
        "deployment_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("deployment_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("last_used_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["deployment_id"],
            ["deployments.id"],
            name=op.f("fk_deployment_keys_deployment_id_deployments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployment_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_deployment_keys_key_hash")),
    )
    with op.batch_alter_table("deployment_keys", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_deployment_keys_deployment_id"), ["deployment_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("deployment_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_deployment_keys_deployment_id"))
    op.drop_table("deployment_keys")
    with op.batch_alter_table("deployments", schema=None) as batch_op:
        batch_op.drop_column("public")
