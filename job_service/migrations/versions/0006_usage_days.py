"""Usage sums per day (``nbjobs_usage_days``) and ``usage_rolled`` on the jobs and the
kept usage of deleted jobs (job_service/usage.py).

The service's start makes the new table and adds the columns before the revisions run
(``db.upgrade_schema``), as nullable columns with no value: here every existing row is
marked as not summed yet, so that the first round of the usage sums adds the whole
history (a report counts those jobs one by one until then, as it did before).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("nbjobs_jobs", "nbjobs_usage_kept"):
        op.execute(f"UPDATE {table} SET usage_rolled = false WHERE usage_rolled IS NULL")
