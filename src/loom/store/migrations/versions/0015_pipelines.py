"""pipeline runs, their tasks, and schedules

Revision ID: 0015_pipelines
Revises: 0014_experiments
Create Date: 2026-11-25 20:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_pipelines"
down_revision = "0014_experiments"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "pipeline_runs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("owner_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("pipeline", sa.String(100), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("sealed", sa.Text(), nullable=True),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("code_digest", sa.String(80), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("schedule", sa.String(100), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_pipeline_runs_owner_id", "pipeline_runs", ["owner_id"])
    op.create_index("ix_pipeline_runs_pipeline", "pipeline_runs", ["pipeline"])
    op.create_index("ix_pipeline_runs_state", "pipeline_runs", ["state"])
    op.create_table(
        "pipeline_tasks",
        sa.Column("id", _ID, primary_key=True),
        sa.Column(
            "run_id",
            sa.String(40),
            sa.ForeignKey("pipeline_runs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("step", sa.String(63), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("item", sa.JSON(), nullable=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("ref", sa.String(300), nullable=False),
        sa.Column("cache_key", sa.String(64), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("not_before", sa.Float(), nullable=True),
        sa.Column("submitted_at", sa.Float(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.UniqueConstraint("run_id", "step", "index", name="uq_pipeline_tasks_run_id"),
    )
    op.create_index("ix_pipeline_tasks_run_id", "pipeline_tasks", ["run_id"])
    op.create_index("ix_pipeline_tasks_ref", "pipeline_tasks", ["ref"])
    op.create_index("ix_pipeline_tasks_cache_key", "pipeline_tasks", ["cache_key"])
    op.create_table(
        "pipeline_schedules",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("owner_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("pipeline", sa.String(100), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("sealed", sa.Text(), nullable=True),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("code_digest", sa.String(80), nullable=False),
        sa.Column("cron", sa.String(200), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("next_at", sa.Float(), nullable=True),
        sa.Column("last_run_id", sa.String(40), nullable=False),
        sa.Column("last_run_at", sa.Float(), nullable=True),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("owner_id", "name", name="uq_pipeline_schedules_owner_id"),
    )
    op.create_index("ix_pipeline_schedules_owner_id", "pipeline_schedules", ["owner_id"])
    op.create_index("ix_pipeline_schedules_next_at", "pipeline_schedules", ["next_at"])


def downgrade() -> None:
    op.drop_table("pipeline_schedules")
    op.drop_table("pipeline_tasks")
    op.drop_table("pipeline_runs")
