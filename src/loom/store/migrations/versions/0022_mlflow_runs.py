"""runs as records: projects (MLflow's experiments), runs (every job is one), their metrics,
artifact files and logged models; run info keyed by run; MLflow's registry fields

Revision ID: 0022_mlflow_runs
Revises: 0021_custom_serving
Create Date: 2026-11-26 14:00:00.000000
"""

import json
import time

import sqlalchemy as sa
from alembic import op

revision = "0022_mlflow_runs"
down_revision = "0021_custom_serving"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STATUS = (
    "CASE jobs.state WHEN 'QUEUED' THEN 'SCHEDULED' WHEN 'COMPLETED' THEN 'FINISHED' "
    "WHEN 'FAILED' THEN 'FAILED' WHEN 'HALTED' THEN 'KILLED' ELSE 'RUNNING' END"
)


def upgrade() -> None:
    _projects()
    _runs()
    _metrics()
    _files_and_logged_models()
    _run_info_by_run()
    with op.batch_alter_table("metric_points") as batch:
        batch.add_column(sa.Column("run_id", sa.String(40), nullable=True))
    _registry()
    _latest_of_jobs()


def _projects() -> None:
    op.create_table(
        "projects",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("owner_id", sa.String(40), nullable=True),
        sa.Column("name", sa.String(500), nullable=False),
        sa.Column("artifact_location", sa.Text(), nullable=False),
        sa.Column("stage", sa.String(20), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name="fk_projects_owner_id_users"),
        sa.PrimaryKeyConstraint("id", name="pk_projects"),
        sa.UniqueConstraint("owner_id", "name", name="uq_projects_owner_id"),
    )
    op.create_index("ix_projects_owner_id", "projects", ["owner_id"])
    now = int(time.time() * 1000)
    op.execute(
        "INSERT INTO projects (id, owner_id, name, artifact_location, stage, created_at, "
        f"updated_at) VALUES (0, NULL, 'Default', 'mlflow-artifacts:/0', 'active', {now}, {now})"
    )
    op.create_table(
        "project_tags",
        sa.Column("project_id", ID, nullable=False),
        sa.Column("key", sa.String(250), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name="fk_project_tags_project_id_projects",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("project_id", "key", name="pk_project_tags"),
    )


def _runs() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("project_id", ID, nullable=False),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("job_id", sa.String(40), nullable=True),
        sa.Column("name", sa.String(250), nullable=False),
        sa.Column("user_id", sa.String(250), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("start_time", sa.BigInteger(), nullable=True),
        sa.Column("end_time", sa.BigInteger(), nullable=True),
        sa.Column("stage", sa.String(20), nullable=False),
        sa.Column("deleted_at", sa.BigInteger(), nullable=True),
        sa.Column("artifact_uri", sa.Text(), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name="fk_runs_owner_id_users"),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name="fk_runs_project_id_projects"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
    )
    op.create_index("ix_runs_job_id", "runs", ["job_id"])
    op.create_index("ix_runs_project_id_start_time", "runs", ["project_id", "start_time", "id"])
    op.create_index("ix_runs_owner_id_start_time", "runs", ["owner_id", "start_time", "id"])
    # Every job is a run, in the Default project, as it would have been had it been made now.
    op.execute(
        "INSERT INTO runs (id, project_id, owner_id, job_id, name, user_id, status, start_time, "
        "end_time, stage, deleted_at, artifact_uri, inputs, outputs) "
        "SELECT jobs.id, 0, jobs.owner_id, jobs.id, jobs.name, users.name, "
        f"{STATUS}, CAST(jobs.submitted_at * 1000 AS BIGINT), "
        "CAST(jobs.finished_at * 1000 AS BIGINT), 'active', NULL, "
        "'mlflow-artifacts:/0/' || jobs.id || '/artifacts', '[]', '[]' "
        "FROM jobs JOIN users ON users.id = jobs.owner_id"
    )


def _metric_columns() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("is_nan", sa.Boolean(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
    ]


def _metrics() -> None:
    op.create_table(
        "run_metrics",
        sa.Column("id", ID, primary_key=True),
        sa.Column("run_id", sa.String(40), nullable=False),
        sa.Column("key", sa.String(250), nullable=False),
        *_metric_columns(),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_run_metrics_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_run_metrics"),
        sa.UniqueConstraint(
            "run_id", "key", "timestamp", "step", "value", "is_nan", name="uq_run_metrics_run_id"
        ),
    )
    op.create_table(
        "run_latest_metrics",
        sa.Column("run_id", sa.String(40), nullable=False),
        sa.Column("key", sa.String(250), nullable=False),
        *_metric_columns(),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_run_latest_metrics_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "key", name="pk_run_latest_metrics"),
    )


def _files_and_logged_models() -> None:
    op.create_table(
        "tracked_files",
        sa.Column("container", sa.String(40), nullable=False),
        sa.Column("path", sa.String(1000), nullable=False),
        sa.Column("digest", sa.String(80), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("container", "path", name="pk_tracked_files"),
    )
    op.create_table(
        "logged_models",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("project_id", ID, nullable=False),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("name", sa.String(500), nullable=False),
        sa.Column("source_run_id", sa.String(40), nullable=True),
        sa.Column("job_id", sa.String(40), nullable=True),
        sa.Column("model_type", sa.String(500), nullable=False),
        sa.Column("status", sa.String(30), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=False),
        sa.Column("stage", sa.String(20), nullable=False),
        sa.Column("artifact_location", sa.Text(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name="fk_logged_models_owner_id_users"),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name="fk_logged_models_project_id_projects"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_logged_models"),
    )
    for column in ("project_id", "owner_id", "source_run_id"):
        op.create_index(f"ix_logged_models_{column}", "logged_models", [column])


def _run_info_by_run() -> None:
    """Run info was a job's: now a run's, and a job's run has the job's id."""
    with op.batch_alter_table("run_info") as batch:
        batch.drop_constraint("fk_run_info_job_id_jobs", type_="foreignkey")
        batch.drop_constraint("uq_run_info_job_id", type_="unique")
        batch.alter_column("job_id", new_column_name="run_id", existing_type=sa.String(40))
    with op.batch_alter_table("run_info") as batch:
        batch.create_foreign_key(
            "fk_run_info_run_id_runs", "runs", ["run_id"], ["id"], ondelete="CASCADE"
        )
        batch.create_unique_constraint("uq_run_info_run_id", ["run_id", "kind", "key"])


def _registry() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("description", sa.Text(), nullable=False, server_default=""))
        batch.add_column(sa.Column("updated_at", sa.Float(), nullable=True))
    with op.batch_alter_table("model_versions") as batch:
        batch.add_column(sa.Column("source", sa.Text(), nullable=False, server_default=""))
        batch.add_column(sa.Column("run_id", sa.String(40), nullable=False, server_default=""))
        batch.add_column(sa.Column("description", sa.Text(), nullable=False, server_default=""))
        batch.add_column(sa.Column("stage", sa.String(20), nullable=False, server_default="None"))
        batch.add_column(sa.Column("updated_at", sa.Float(), nullable=True))
    op.create_table(
        "model_tags",
        sa.Column("model_id", sa.String(40), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(250), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name="fk_model_tags_model_id_models", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("model_id", "version", "key", name="pk_model_tags"),
    )


def _latest_of_jobs() -> None:
    """Each stored job's latest value of each metric, so that searches see them."""
    connection = op.get_bind()
    latest: dict[tuple[str, str], tuple[int, int, float, bool]] = {}
    rows = connection.execute(
        sa.text('SELECT job_id, seq, time, "group", step, "values" FROM metric_points')
    )
    for job_id, seq, at, group, step, values in rows:
        found = values if isinstance(values, dict) else json.loads(values)
        for name, value in found.items():
            key = name if group == "mlflow" else f"{group}/{name}"
            nan = value is None
            candidate = (step if step is not None else seq, round(at * 1000), value or 0.0, nan)
            if (job_id, key) not in latest or candidate[:3] > latest[(job_id, key)][:3]:
                latest[(job_id, key)] = candidate
    table = sa.table(
        "run_latest_metrics",
        *(sa.column(n) for n in ("run_id", "key", "value", "is_nan", "step", "timestamp")),
    )
    entries = [
        {"run_id": job, "key": key, "step": s, "timestamp": t, "value": v, "is_nan": nan}
        for (job, key), (s, t, v, nan) in latest.items()
        if len(key) <= 250
    ]
    if entries:
        op.bulk_insert(table, entries)


def downgrade() -> None:
    op.drop_table("model_tags")
    with op.batch_alter_table("model_versions") as batch:
        for column in ("updated_at", "stage", "description", "run_id", "source"):
            batch.drop_column(column)
    with op.batch_alter_table("models") as batch:
        batch.drop_column("updated_at")
        batch.drop_column("description")
    with op.batch_alter_table("metric_points") as batch:
        batch.drop_column("run_id")
    op.execute("DELETE FROM run_info WHERE run_id NOT IN (SELECT id FROM jobs)")
    with op.batch_alter_table("run_info") as batch:
        batch.drop_constraint("fk_run_info_run_id_runs", type_="foreignkey")
        batch.drop_constraint("uq_run_info_run_id", type_="unique")
        batch.alter_column("run_id", new_column_name="job_id", existing_type=sa.String(40))
    with op.batch_alter_table("run_info") as batch:
        batch.create_foreign_key(
            "fk_run_info_job_id_jobs", "jobs", ["job_id"], ["id"], ondelete="CASCADE"
        )
        batch.create_unique_constraint("uq_run_info_job_id", ["job_id", "kind", "key"])
    for table in (
        "logged_models",
        "tracked_files",
        "run_latest_metrics",
        "run_metrics",
        "runs",
        "project_tags",
        "projects",
    ):
        op.drop_table(table)
