"""Every table the service keeps, in one list.

Each table's model lives beside the part that uses it (the audit, the notifications'
outbox, the schedules' definitions, the jobs in ``db``); ``Base.metadata`` knows a table
only once its module is imported. What needs every one of them (``nbjobs
copy-database``, the schema's outline and its upgrade tests) takes them from here, so a
new table is named once.
"""

from __future__ import annotations

from sqlalchemy import MetaData

from . import audit, credits, db, deleted_users, usage
from .notifications import store as notification_store
from .schedules import store as schedule_store

#: the modules that define tables
TABLE_MODULES = (db, audit, usage, credits, notification_store, schedule_store, deleted_users)

#: every table the service keeps
ALL: MetaData = db.Base.metadata
