"""The job database's migrations (Alembic), the one way its tables are made and changed:
``versions/0004_base.py`` makes the tables of schema version 4 (and brings a database
from before Alembic to them), and each later change is a revision after it, numbered by
the schema version it reaches. :func:`~..db.upgrade_schema` applies them when the service
starts. Make one with ``alembic -c job_service/migrations/alembic.ini revision -m "what
changes"`` (docs/development.md).
"""
