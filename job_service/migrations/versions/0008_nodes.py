"""``nbjobs_jobs.nodes``: how many nodes a multi-node job spans (schema version 7).

The service made this column itself at its start, before the revisions ran, in the
releases from schema version 7 until the revisions alone shaped the database: it is
added here where it is missing.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from nbjobs.job_service.migrations.steps import ensure_table

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    ensure_table("nbjobs_jobs", sa.Column("nodes", sa.Integer(), nullable=True))
