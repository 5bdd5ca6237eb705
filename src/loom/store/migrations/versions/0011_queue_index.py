"""the queue's own index: queued jobs only, in queue order (priority descending, submission, id)

Revision ID: 0011_queue_index
Revises: 0010_job_paging
Create Date: 2026-11-23 15:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_queue_index"
down_revision = "0010_job_paging"
branch_labels = None
depends_on = None

# A scheduling pass reads the queue in chunks, in this order: without it, every chunk sorted all
# the queued jobs. Partial, so it holds only the queue, not the whole history.
QUEUED = sa.text("state = 'QUEUED'")


def upgrade() -> None:
    op.create_index(
        "ix_jobs_queue",
        "jobs",
        [sa.text("priority DESC"), "submitted_at", "id"],
        postgresql_where=QUEUED,
        sqlite_where=QUEUED,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_queue", table_name="jobs")
