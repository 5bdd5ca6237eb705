"""monitoring: a deployment's monitoring settings, the drift windows its detector reported, a
model version's evaluations, and schedules that fire on a trigger (drift, new data)

Revision ID: 0023_monitoring
Revises: 0022_mlflow_runs
Create Date: 2026-12-01 04:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0023_monitoring"
down_revision = "0022_mlflow_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(sa.Column("monitoring", sa.JSON(), nullable=True))
    with op.batch_alter_table("pipeline_schedules") as batch:
        batch.add_column(sa.Column("trigger", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("trigger_state", sa.JSON(), nullable=True))
    op.create_table(
        "drift_windows",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("deployment_id", sa.String(40), nullable=False),
        sa.Column("window_key", sa.String(80), nullable=False),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("deployment", sa.String(63), nullable=False),
        sa.Column("model_name", sa.String(200), nullable=False),
        sa.Column("model_version", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("since", sa.Float(), nullable=False),
        sa.Column("drift", sa.Boolean(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("p_value", sa.Float(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("outliers", sa.Integer(), nullable=False),
        sa.Column("features", sa.JSON(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_drift_windows")),
        sa.UniqueConstraint(
            "deployment_id", "window_key", name=op.f("uq_drift_windows_deployment_id")
        ),
    )
    op.create_index(op.f("ix_drift_windows_at"), "drift_windows", ["at"])
    op.create_index(
        "ix_drift_windows_model", "drift_windows", ["owner_id", "model_name", "model_version"]
    )
    op.create_table(
        "model_evaluations",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("model_id", sa.String(40), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("job_id", sa.String(40), nullable=False),
        sa.Column("lineage", sa.JSON(), nullable=True),
        sa.Column("results", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_model_evaluations_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_evaluations")),
        sa.UniqueConstraint(
            "job_id", "model_id", "version", "kind", name=op.f("uq_model_evaluations_job_id")
        ),
    )
    op.create_index("ix_model_evaluations_version", "model_evaluations", ["model_id", "version"])


def downgrade() -> None:
    op.drop_index("ix_model_evaluations_version", table_name="model_evaluations")
    op.drop_table("model_evaluations")
    op.drop_index("ix_drift_windows_model", table_name="drift_windows")
    op.drop_index(op.f("ix_drift_windows_at"), table_name="drift_windows")
    op.drop_table("drift_windows")
    with op.batch_alter_table("pipeline_schedules") as batch:
        batch.drop_column("trigger_state")
        batch.drop_column("trigger")
    with op.batch_alter_table("deployments") as batch:
        batch.drop_column("monitoring")
