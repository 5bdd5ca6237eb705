"""deployments

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21 22:11:17.375911
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deployments",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("model_name", sa.String(length=200), nullable=False),
        sa.Column("model_ref", sa.String(length=100), nullable=False),
        sa.Column("model_version", sa.Integer(), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("min_replicas", sa.Integer(), nullable=False),
        sa.Column("max_replicas", sa.Integer(), nullable=False),
        sa.Column("target_concurrency", sa.Float(), nullable=False),
        sa.Column("scale_down_delay_s", sa.Float(), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("batch_wait_ms", sa.Float(), nullable=False),
        sa.Column("request_log", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_deployments_owner_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployments")),
        sa.UniqueConstraint("owner_id", "name", name=op.f("uq_deployments_owner_id")),
        sa.UniqueConstraint("port", name=op.f("uq_deployments_port")),
    )
    with op.batch_alter_table("deployments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_deployments_owner_id"), ["owner_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("deployments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_deployments_owner_id"))

    op.drop_table("deployments")
