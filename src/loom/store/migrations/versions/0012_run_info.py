"""run info: a job's logged parameters and tags; a model version keeps them as provenance

Revision ID: 0012_run_info
Revises: 0011_queue_index
Create Date: 2026-11-23 16:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_run_info"
down_revision = "0011_queue_index"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "run_info",
        sa.Column("id", ID, primary_key=True),
        sa.Column("job_id", sa.String(40), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("key", sa.String(250), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("set_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_run_info_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_run_info"),
        sa.UniqueConstraint("job_id", "kind", "key", name="uq_run_info_job_id"),
    )
    with op.batch_alter_table("model_versions") as batch:
        batch.add_column(sa.Column("run_info", sa.JSON(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("run_info")
    op.drop_table("run_info")
