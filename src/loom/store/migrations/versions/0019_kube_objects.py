"""kube_objects: Kubernetes-style objects applied with `loom apply`

Revision ID: 0019_kube_objects
Revises: 0016_serving_gpus
Create Date: 2026-11-26 14:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0019_kube_objects"
down_revision = "0016_serving_gpus"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kube_objects",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("owner_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("api_group", sa.String(100), nullable=False),
        sa.Column("api_version", sa.String(120), nullable=False),
        sa.Column("kind", sa.String(63), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("sealed", sa.Text(), nullable=True),
        sa.Column("refs", sa.JSON(), nullable=False),
        sa.Column("notes", sa.JSON(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.UniqueConstraint(
            "owner_id", "api_group", "kind", "name", name="uq_kube_objects_owner_id"
        ),
    )
    op.create_index("ix_kube_objects_owner_id", "kube_objects", ["owner_id"])


def downgrade() -> None:
    op.drop_index("ix_kube_objects_owner_id", table_name="kube_objects")
    op.drop_table("kube_objects")
