"""quotas gpus restarts

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 20:50:10.034525
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("restart_pending", sa.Boolean(), server_default="0", nullable=False)
        )

    with op.batch_alter_table("learners", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("devices", sa.String(length=200), server_default="", nullable=False)
        )

    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("quota_cpus", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("quota_gpus", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("quota_jobs", sa.Integer(), nullable=True))


def downgrade() -> None:

    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("quota_jobs")
        batch_op.drop_column("quota_gpus")
        batch_op.drop_column("quota_cpus")

    with op.batch_alter_table("learners", schema=None) as batch_op:
        batch_op.drop_column("devices")

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("restart_pending")
