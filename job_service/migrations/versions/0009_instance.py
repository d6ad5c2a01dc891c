"""``nbjobs_instance``: the database's instance id (schema version 9). The service makes
its one row at its first start on the database; every Kubernetes object it makes carries
it, and it stops only objects that carry its own.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from nbjobs.job_service.migrations.steps import ensure_table

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    ensure_table(
        "nbjobs_instance",
        sa.Column("key", sa.String(16), primary_key=True),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("made_at", sa.DateTime(), nullable=False),
    )
