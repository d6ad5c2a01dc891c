"""nbjobs_users and nbjobs_deleted_users: which person of each hub name the service
knows, and the users it retired (job_service/deleted_users.py).

A service from before the revisions alone shaped the database made every table its
models define at its start, so the tables may be there already: each is made here only
where it is not.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    have = sa.inspect(op.get_bind())
    if not have.has_table("nbjobs_users"):
        op.create_table(
            "nbjobs_users",
            sa.Column("name", sa.String(255), primary_key=True),
            sa.Column("hub_created", sa.String(64), nullable=False),
            sa.Column("first_seen", sa.DateTime(), nullable=False),
        )
    if not have.has_table("nbjobs_deleted_users"):
        op.create_table(
            "nbjobs_deleted_users",
            sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
            sa.Column("name", sa.String(255), nullable=False),
            sa.Column("hub_created", sa.String(64), nullable=True),
            sa.Column("noticed_at", sa.DateTime(), nullable=False),
            sa.Column("why", sa.Text(), nullable=False),
            sa.Column("action", sa.String(8), nullable=False),
            sa.Column("archived_as", sa.String(255), nullable=False),
            sa.Column("jobs", sa.Integer(), nullable=False),
            sa.Column("cancelled", sa.Integer(), nullable=False),
            sa.Column("definitions", sa.Integer(), nullable=False),
            sa.Column("settings", sa.Integer(), nullable=False),
            sa.Column("folder", sa.Text(), nullable=True),
            sa.Column("account", sa.String(64), nullable=True),
            sa.Column("problems", sa.Text(), nullable=True),
        )
        op.create_index("ix_nbjobs_deleted_users_name", "nbjobs_deleted_users", ["name"])
        op.create_index(
            "ix_nbjobs_deleted_users_noticed_at", "nbjobs_deleted_users", ["noticed_at"]
        )
