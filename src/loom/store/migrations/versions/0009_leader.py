"""leader lease: one API server runs the lifecycle at a time

Revision ID: 0009_leader
Revises: 0008_serving_auth
Create Date: 2026-11-23 10:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_leader"
down_revision = "0008_serving_auth"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("term", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
    )


def downgrade() -> None:
    op.drop_table("leases")
