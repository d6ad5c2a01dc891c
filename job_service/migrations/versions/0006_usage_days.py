"""Usage sums per day (``nbjobs_usage_days``), ``usage_rolled`` on the jobs and the kept
usage of deleted jobs (job_service/usage.py); credits (job_service/credits.py).

Here the tables are made and the columns added (nullable: the rows there have no value
for them; a table or column a service from before Alembic made at its start is kept),
and then:

- every existing row is marked as not summed yet, so that the first round of the usage
  sums adds the whole history (a report counts those jobs one by one until then);
- existing jobs get ``credits_charged`` false: they have no account, nothing to charge;
- the credit entries (grants and charges) are made unchangeable: the database itself
  refuses to update or delete one, whoever asks.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from nbjobs.job_service.migrations.steps import ensure_table

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: what the database answers an UPDATE or DELETE of a credit entry
KEPT = "credit entries are kept: grant or take back credits instead"


#: the condition of the partial indexes of what is not summed yet
NOT_ROLLED = "usage_rolled = false"
#: the condition of the partial index of jobs whose credits are held, not charged yet
UNCHARGED = "credit_account IS NOT NULL AND credits_charged = false"


def upgrade() -> None:
    ensure_table(
        "nbjobs_jobs",
        sa.Column("usage_rolled", sa.Boolean(), nullable=True),
        sa.Column("credit_account", sa.String(length=300), nullable=True),
        sa.Column("credit_hold", sa.Float(), nullable=True),
        sa.Column("credit_price", sa.Float(), nullable=True),
        sa.Column("credits_charged", sa.Boolean(), nullable=True),
        indexes=[
            ("ix_nbjobs_jobs_unrolled", ["started_at"], False, NOT_ROLLED),
            ("ix_nbjobs_jobs_uncharged", ["credit_account"], False, UNCHARGED),
        ],
    )
    ensure_table(
        "nbjobs_usage_kept",
        sa.Column("usage_rolled", sa.Boolean(), nullable=True),
        indexes=[("ix_nbjobs_usage_kept_unrolled", ["started_at"], False, NOT_ROLLED)],
    )
    ensure_table(
        "nbjobs_usage_days",
        sa.Column("breakdown", sa.String(length=8), nullable=False),
        sa.Column("day", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("allocated", sa.Float(), nullable=False),
        sa.Column("busy", sa.Float(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=True),
        sa.Column("began", sa.Integer(), nullable=False),
        sa.Column("ran", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("breakdown", "day", "name"),
    )
    ensure_table(
        "nbjobs_credit_accounts",
        sa.Column("name", sa.String(length=300), nullable=False),
        sa.Column("made_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    if not sa.inspect(op.get_bind()).has_table("nbjobs_credit_entries"):
        op.create_table(
            "nbjobs_credit_entries",
            sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
            sa.Column("at", sa.DateTime(), nullable=False),
            sa.Column("account", sa.String(300), nullable=False),
            sa.Column("kind", sa.String(8), nullable=False),
            sa.Column("amount", sa.Float(), nullable=False),
            sa.Column("job_id", sa.String(32), nullable=True, unique=True),
            sa.Column("by", sa.String(255), nullable=False),
            sa.Column("note", sa.String(300), nullable=False),
        )
        op.create_index("ix_nbjobs_credit_entries_at", "nbjobs_credit_entries", ["at"])
        op.create_index("ix_nbjobs_credit_entries_account", "nbjobs_credit_entries", ["account"])
    for table in ("nbjobs_jobs", "nbjobs_usage_kept"):
        op.execute(f"UPDATE {table} SET usage_rolled = false WHERE usage_rolled IS NULL")
    op.execute("UPDATE nbjobs_jobs SET credits_charged = false WHERE credits_charged IS NULL")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE OR REPLACE FUNCTION nbjobs_credit_entries_kept() RETURNS trigger AS $$ "
            f"BEGIN RAISE EXCEPTION '{KEPT}'; END; $$ LANGUAGE plpgsql"
        )
        for event, each in (("UPDATE", "ROW"), ("DELETE", "ROW"), ("TRUNCATE", "STATEMENT")):
            name = f"nbjobs_credit_entries_no_{event.lower()}"
            op.execute(f"DROP TRIGGER IF EXISTS {name} ON nbjobs_credit_entries")
            op.execute(
                f"CREATE TRIGGER {name} BEFORE {event} ON nbjobs_credit_entries "
                f"FOR EACH {each} EXECUTE FUNCTION nbjobs_credit_entries_kept()"
            )
    else:
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER IF NOT EXISTS nbjobs_credit_entries_no_{event.lower()} "
                f"BEFORE {event} ON nbjobs_credit_entries "
                f"BEGIN SELECT RAISE(ABORT, '{KEPT}'); END"
            )
