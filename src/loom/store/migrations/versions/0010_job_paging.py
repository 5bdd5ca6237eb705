"""job listing indexes: keyset pages of (submitted_at, id), by owner and by state

Revision ID: 0010_job_paging
Revises: 0009_leader
Create Date: 2026-11-23 12:00:00.000000
"""

from alembic import op

revision = "0010_job_paging"
down_revision = "0009_leader"
branch_labels = None
depends_on = None

# Each listing (everyone's, one owner's, in some states) is one index range, newest first; the
# single-column indexes they replace are their prefixes.
COMPOSITES = {
    "ix_jobs_submitted_at_id": ["submitted_at", "id"],
    "ix_jobs_owner_id_submitted_at": ["owner_id", "submitted_at", "id"],
    "ix_jobs_state_submitted_at": ["state", "submitted_at", "id"],
}
SINGLES = {"ix_jobs_owner_id": ["owner_id"], "ix_jobs_state": ["state"]}
SINGLES["ix_jobs_submitted_at"] = ["submitted_at"]


def upgrade() -> None:
    for name, columns in COMPOSITES.items():
        op.create_index(name, "jobs", columns)
    for name in SINGLES:
        op.drop_index(name, table_name="jobs")


def downgrade() -> None:
    for name, columns in SINGLES.items():
        op.create_index(name, "jobs", columns)
    for name in COMPOSITES:
        op.drop_index(name, table_name="jobs")
