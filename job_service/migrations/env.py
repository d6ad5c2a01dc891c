"""Alembic's environment for the job database: always given an open connection by
:func:`~nbjobs.job_service.db.upgrade_schema` (never a URL of its own)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
