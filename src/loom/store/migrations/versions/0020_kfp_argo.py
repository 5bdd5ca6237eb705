"""sub-pipeline runs and a run's outputs; objects kept for foreign APIs (KFP, Argo)

Revision ID: 0020_kfp_argo
Revises: 0019_kube_objects
Create Date: 2026-12-01 09:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_kfp_argo"
down_revision = "0019_kube_objects"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pipeline_runs") as batch:
        batch.add_column(sa.Column("parent_id", sa.String(40), nullable=True))
        batch.add_column(sa.Column("outputs", sa.JSON(), nullable=True))
        batch.create_index("ix_pipeline_runs_parent_id", ["parent_id"])
    op.create_table(
        "dialect_objects",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("owner_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("dialect", sa.String(20), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("parent_id", sa.String(64), nullable=True),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_dialect_objects_owner_id", "dialect_objects", ["owner_id"])
    op.create_index("ix_dialect_objects_parent_id", "dialect_objects", ["parent_id"])
    op.create_index(
        "ix_dialect_objects_kind", "dialect_objects", ["owner_id", "dialect", "kind", "name"]
    )


def downgrade() -> None:
    op.drop_table("dialect_objects")
    with op.batch_alter_table("pipeline_runs") as batch:
        batch.drop_index("ix_pipeline_runs_parent_id")
        batch.drop_column("outputs")
        batch.drop_column("parent_id")
