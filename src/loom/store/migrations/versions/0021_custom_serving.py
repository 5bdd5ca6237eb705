"""deployments: the runtime asked for, packages, explainer, transformer and inference graph

Revision ID: 0021_custom_serving
Revises: 0019_kube_objects
Create Date: 2026-11-26 14:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0021_custom_serving"
down_revision = "0019_kube_objects"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(sa.Column("runtime", sa.String(30), nullable=True))
        batch.add_column(sa.Column("pip", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("explainer", sa.String(30), nullable=True))
        batch.add_column(sa.Column("transformer", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("graph", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        for column in ("graph", "transformer", "explainer", "pip", "runtime"):
            batch.drop_column(column)
