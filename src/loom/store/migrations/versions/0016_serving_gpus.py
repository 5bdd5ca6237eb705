"""deployments: how many GPUs each replica is pinned to

Revision ID: 0016_serving_gpus
Revises: 0015_pipelines
Create Date: 2026-11-26 04:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_serving_gpus"
down_revision = "0015_pipelines"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(
            sa.Column("gpus_per_replica", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.drop_column("gpus_per_replica")
