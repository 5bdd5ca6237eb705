"""experiments and their trials; a job's lineage (what made it), kept by its model versions

Revision ID: 0014_experiments
Revises: 0013_grpc_canary
Create Date: 2026-11-23 23:40:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_experiments"
down_revision = "0013_grpc_canary"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("owner_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("sealed", sa.Text(), nullable=True),
        sa.Column("code_digest", sa.String(80), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("reason", sa.String(40), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("max_trial_count", sa.Integer(), nullable=True),
        sa.Column("sampler_state", sa.JSON(), nullable=False),
        sa.Column("best_trial", sa.Integer(), nullable=True),
        sa.Column("best_model", sa.String(300), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.UniqueConstraint("owner_id", "name", name="uq_experiments_owner_id"),
    )
    op.create_index("ix_experiments_owner_id", "experiments", ["owner_id"])
    op.create_index("ix_experiments_state", "experiments", ["state"])
    op.create_table(
        "trials",
        sa.Column("id", _ID, primary_key=True),
        sa.Column(
            "experiment_id",
            sa.String(40),
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(40), nullable=False),
        sa.Column("state", sa.String(24), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("sampler_state", sa.JSON(), nullable=False),
        sa.Column("objective", sa.Float(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("intermediate", sa.JSON(), nullable=False),
        sa.Column("stop_reason", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("submitted_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.UniqueConstraint("experiment_id", "number", name="uq_trials_experiment_id"),
    )
    op.create_index("ix_trials_experiment_id", "trials", ["experiment_id"])
    op.create_index("ix_trials_job_id", "trials", ["job_id"])
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("lineage", sa.JSON(), nullable=True))
    with op.batch_alter_table("model_versions") as batch:
        batch.add_column(sa.Column("lineage", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("lineage")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("lineage")
    op.drop_table("trials")
    op.drop_table("experiments")
