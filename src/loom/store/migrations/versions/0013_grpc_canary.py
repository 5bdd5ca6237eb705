"""deployments: the port of their V2 gRPC endpoint, and a canary version with its share

Revision ID: 0013_grpc_canary
Revises: 0012_run_info
Create Date: 2026-11-23 10:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_grpc_canary"
down_revision = "0012_run_info"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(sa.Column("grpc_port", sa.Integer(), nullable=True))
        batch.create_unique_constraint("uq_deployments_grpc_port", ["grpc_port"])
        batch.add_column(sa.Column("canary_version", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("canary_percent", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.drop_column("canary_percent")
        batch.drop_column("canary_version")
        batch.drop_constraint("uq_deployments_grpc_port", type_="unique")
        batch.drop_column("grpc_port")
