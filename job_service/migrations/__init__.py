"""The job database's migrations (Alembic): each change to the tables after schema
version 4 is a revision in ``versions/``, applied by :func:`~..db.upgrade_schema` when
the service starts. Make one with ``alembic -c job_service/migrations/alembic.ini
revision -m "what changes"`` (docs/development.md)."""
