"""The base revision: the tables as schema version 4 left them.

Databases from before Alembic (schema versions 1 to 4) are brought to version 4 by
``db.upgrade_schema``'s own steps (new tables made, new columns added) and then stamped
with this revision; a new database is made at version 4 and stamped the same way. Every
later change to the tables is a revision after this one.

Revision ID: 0004
Revises:
"""

from __future__ import annotations

revision = "0004"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass  # the tables are made (or brought here) before Alembic runs
