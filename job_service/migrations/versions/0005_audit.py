"""nbjobs_audit: who read another person's job log or result (job_service/audit.py).

A service from before the revisions alone shaped the database made every table its
models define at its start, so the table may be there already: it is made here only
where it is not.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("nbjobs_audit"):
        return
    op.create_table(
        "nbjobs_audit",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("reader", sa.String(255), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("job_id", sa.String(32), nullable=False),
        sa.Column("what", sa.String(16), nullable=False),
    )
    op.create_index("ix_nbjobs_audit_at", "nbjobs_audit", ["at"])
    op.create_index("ix_nbjobs_audit_owner", "nbjobs_audit", ["owner"])
