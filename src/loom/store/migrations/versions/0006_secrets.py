"""secrets at rest: each job's credentials sealed apart from its manifest

Jobs stored before this have no row yet; the platform seals them at start, with its key (a
migration has none), and redacts their manifests.

Revision ID: 0006_secrets
Revises: 0005
Create Date: 2026-11-22 10:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_secrets"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_secrets",
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("sealed", sa.Text(), nullable=True),
        sa.Column("sealed_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_job_secrets_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_secrets")),
    )


def downgrade() -> None:
    op.drop_table("job_secrets")
