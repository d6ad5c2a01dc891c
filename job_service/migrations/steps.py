"""What the revisions share: a table made whole where it is missing, or given the
columns and indexes it lacks where it is there.

Databases from before Alembic were shaped by the service itself at each start (it made
missing tables and added missing columns), so a table of any revision may be there in
part; each revision brings its tables to its own definition whatever it finds. A column
added to a table that holds rows is added nullable (those rows have no value for it);
the revision fills it where it needs one.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

#: an index: its name, its columns, unique, and the condition of a partial one
IndexSpec = tuple[str, list[str], bool, str | None]


def ensure_table(name: str, *elements: Any, indexes: list[IndexSpec] | None = None) -> list[str]:
    """Make table ``name`` of ``elements`` (columns and constraints, as for
    ``op.create_table``) with ``indexes`` where there is none; where there is one, add
    the columns and indexes it lacks. The columns added (none for a table made)."""
    bind = op.get_bind()
    have = sa.inspect(bind)
    added = []
    if not have.has_table(name):
        op.create_table(name, *elements)
    else:
        present = {column["name"] for column in have.get_columns(name)}
        for column in elements:
            if isinstance(column, sa.Column) and column.name not in present:
                op.add_column(name, sa.Column(column.name, column.type, nullable=True))
                added.append(column.name)
    present_indexes = {index["name"] for index in sa.inspect(bind).get_indexes(name)}
    for index, columns, unique, where in indexes or []:
        if index in present_indexes:
            continue
        condition = None if where is None else sa.text(where)  # a partial index's
        op.create_index(
            index,
            name,
            columns,
            unique=unique,
            sqlite_where=condition,
            postgresql_where=condition,
        )
    return added
