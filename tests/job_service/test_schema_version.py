"""The job database's schema version: bumped with each change to the tables, recorded by
the service, and a database a newer nbjobs shaped is used with a warning in the log."""

from __future__ import annotations

import hashlib
import logging

import pytest
import sqlalchemy
from alembic.script import ScriptDirectory
from nbjobs.job_service import db as jobdb
from nbjobs.job_service.db import MIGRATIONS, SCHEMA_VERSION, connect
from nbjobs.job_service.tables import ALL  # every table the service keeps

from .conftest import new_postgres_database

#: each schema version's outline (its hash): a change to the tables without a new
#: version fails here
OUTLINES = {
    2: "74aa94031e14f733",
    3: "c757e03f164146e1",
    4: "d4c80893f70709d9",
    5: "78fe0278ed2c0876",
    6: "3865ad5ce50ef49a",
    7: "4d61313e85752f32",
    8: "7d3c4f075f43eebd",
    9: "aaa57877e85de0fb",
}


def outline() -> str:
    lines = []
    for table in sorted(ALL.tables.values(), key=lambda t: t.name):
        for column in table.columns:
            lines.append(
                f"{table.name}.{column.name} {column.type!r} null={column.nullable} "
                f"pk={column.primary_key}"
            )
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            lines.append(f"{table.name} index {index.name} {[c.name for c in index.columns]}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def test_a_change_to_the_tables_comes_with_a_new_schema_version():
    assert outline() == OUTLINES.get(SCHEMA_VERSION), (
        "the tables changed: add a revision that changes them (job_service/migrations), "
        "bump SCHEMA_VERSION in job_service/db.py to its number and add "
        f"{SCHEMA_VERSION if SCHEMA_VERSION not in OUTLINES else SCHEMA_VERSION + 1}: "
        f"{outline()!r} to OUTLINES here"
    )


def versions(url: str) -> list[int]:
    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        found = [v for (v,) in conn.execute(sqlalchemy.text("SELECT version FROM nbjobs_schema"))]
    engine.dispose()
    return found


def test_an_older_database_is_upgraded_and_the_log_says_what_was_added(tmp_path, caplog):
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    connect(url).kw["bind"].dispose()
    # as version 1 left it: no job definitions, no telemetry summary column
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("DROP TABLE nbjobs_definition_runs"))
        conn.execute(sqlalchemy.text("ALTER TABLE nbjobs_jobs DROP COLUMN gpu_seconds_held"))
        conn.execute(sqlalchemy.text("UPDATE nbjobs_schema SET version = 1"))
        conn.execute(sqlalchemy.text("DROP TABLE alembic_version"))  # from before Alembic
    engine.dispose()

    with caplog.at_level(logging.INFO, "nbjobs.job_service"):
        connect(url).kw["bind"].dispose()

    assert versions(url) == [SCHEMA_VERSION]
    [said] = [r.getMessage() for r in caplog.records if "upgraded the job database" in r.message]
    assert f"from schema version 1 to {SCHEMA_VERSION}" in said
    assert "new tables: nbjobs_definition_runs" in said
    assert "new columns: nbjobs_jobs.gpu_seconds_held" in said
    # a second start has nothing to say
    caplog.clear()
    with caplog.at_level(logging.INFO, "nbjobs.job_service"):
        connect(url).kw["bind"].dispose()
    assert not [r for r in caplog.records if "upgraded" in r.getMessage()]


def test_a_new_database_is_made_at_this_version_without_an_upgrade_said(tmp_path, caplog):
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    with caplog.at_level(logging.INFO, "nbjobs.job_service"):
        connect(url).kw["bind"].dispose()
    assert versions(url) == [SCHEMA_VERSION]
    assert not [r for r in caplog.records if "upgraded" in r.getMessage()]


def test_a_database_a_newer_nbjobs_shaped_is_used_and_said_so(tmp_path, caplog, monkeypatch):
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    monkeypatch.setattr(jobdb, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    connect(url).kw["bind"].dispose()
    monkeypatch.undo()

    with caplog.at_level(logging.INFO, "nbjobs.job_service"):
        sessions = connect(url)
    with sessions() as session:
        assert session.scalar(sqlalchemy.text("SELECT count(*) FROM nbjobs_jobs")) == 0
    sessions.kw["bind"].dispose()

    assert versions(url) == [SCHEMA_VERSION + 1]  # left as the newer one set it
    [said] = [r for r in caplog.records if "newer nbjobs" in r.getMessage()]
    assert said.levelno == logging.WARNING
    assert f"(schema version {SCHEMA_VERSION + 1}; this one knows {SCHEMA_VERSION})" in (
        said.getMessage()
    )
    assert "restore the backup taken before the upgrade" in said.getMessage()


#: what each schema version lacked of the next, to make an older database from today's:
#: tables that came later, columns (table, column) and the indexes on those columns
CAME_LATER = {
    9: (["nbjobs_instance"], [], []),
    8: (["nbjobs_users", "nbjobs_deleted_users"], [], []),
    7: ([], [("nbjobs_jobs", "nodes")], []),
    6: (
        ["nbjobs_usage_days", "nbjobs_credit_accounts", "nbjobs_credit_entries"],
        [
            ("nbjobs_jobs", "usage_rolled"),
            ("nbjobs_usage_kept", "usage_rolled"),
            ("nbjobs_jobs", "credit_account"),
            ("nbjobs_jobs", "credit_hold"),
            ("nbjobs_jobs", "credit_price"),
            ("nbjobs_jobs", "credits_charged"),
        ],
        ["ix_nbjobs_jobs_unrolled", "ix_nbjobs_usage_kept_unrolled", "ix_nbjobs_jobs_uncharged"],
    ),
    5: (["nbjobs_audit"], [], []),
    4: (["nbjobs_mail_addresses"], [("nbjobs_jobs", "input_removed_at")], []),
    3: (["nbjobs_usage_kept"], [], []),
    2: ([], [], []),  # version 2 numbered the same tables
    1: (["nbjobs_definition_runs"], [("nbjobs_jobs", "gpu_seconds_held")], []),
}


#: the newest revision each release of a schema version had run (schema 7's service
#: added its column itself at its start, its newest revision was 6's); none before 5
REVISION_OF = {5: "0005", 6: "0006", 7: "0006", 8: "0008"}


def as_of(url: str, version: int) -> None:
    """Make the database at ``url`` (today's tables) look as ``version`` left it: none
    of what came after it, and the revision that release recorded (none from before
    Alembic, versions 1 to 4)."""
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        if version in REVISION_OF:
            conn.execute(
                sqlalchemy.text("UPDATE alembic_version SET version_num = :r"),
                {"r": REVISION_OF[version]},
            )
        else:
            conn.execute(sqlalchemy.text("DROP TABLE alembic_version"))
        for later in range(SCHEMA_VERSION, version, -1):
            tables, columns, indexes = CAME_LATER[later]
            for index in indexes:
                conn.execute(sqlalchemy.text(f"DROP INDEX IF EXISTS {index}"))
            for table in tables:
                conn.execute(sqlalchemy.text(f"DROP TABLE {table}"))
            for table, column in columns:
                conn.execute(sqlalchemy.text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(sqlalchemy.text(f"UPDATE nbjobs_schema SET version = {version}"))
    engine.dispose()


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_each_earlier_schema_upgrades_to_the_newest_revision(tmp_path, request, database, version):
    if database == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    else:
        url = new_postgres_database(request.getfixturevalue("postgres_url"), tmp_path)
    connect(url).kw["bind"].dispose()
    as_of(url, version)

    connect(url).kw["bind"].dispose()

    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        revision = conn.execute(sqlalchemy.text("SELECT version_num FROM alembic_version")).all()
        inspector = sqlalchemy.inspect(conn)
        have = {
            (table, column["name"])
            for table in inspector.get_table_names()
            for column in inspector.get_columns(table)
        }
    engine.dispose()
    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    assert revision == [(head,)]
    assert versions(url) == [SCHEMA_VERSION]
    wanted = {(t.name, c.name) for t in ALL.sorted_tables for c in t.columns}
    assert wanted <= have  # every table and column of today's


def test_the_migrations_start_from_the_base_revision_of_schema_4():
    script = ScriptDirectory(str(MIGRATIONS))
    [base] = script.get_bases()
    assert base == "0004"
    assert SCHEMA_VERSION >= 4


def test_a_database_at_revision_0004_gains_the_audit_table(tmp_path):
    """Alembic's own path: a database of schema 4 already stamped 0004 (made by the
    nbjobs before this one) upgrades to the newest revision with the audit table."""
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    connect(url).kw["bind"].dispose()
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("DROP TABLE nbjobs_audit"))
        conn.execute(sqlalchemy.text("UPDATE alembic_version SET version_num = '0004'"))
        conn.execute(sqlalchemy.text("UPDATE nbjobs_schema SET version = 4"))
    engine.dispose()

    connect(url).kw["bind"].dispose()

    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        assert sqlalchemy.inspect(conn).has_table("nbjobs_audit")
        revision = conn.execute(sqlalchemy.text("SELECT version_num FROM alembic_version")).all()
    engine.dispose()
    assert revision == [(ScriptDirectory(str(MIGRATIONS)).get_current_head(),)]
    assert versions(url) == [SCHEMA_VERSION]


def test_the_schema_version_is_the_newest_revisions_number():
    # a service finds a database at this revision without Alembic (jobdb.HEAD_REVISION)
    assert ScriptDirectory(str(MIGRATIONS)).get_current_head() == jobdb.HEAD_REVISION
    assert int(jobdb.HEAD_REVISION) == SCHEMA_VERSION


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_new_database_made_by_the_revisions_has_every_table_and_column(
    tmp_path, request, database
):
    # the revisions alone make the tables: none is made from the models any more, so a
    # model's table or column no revision makes would be missing here
    if database == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    else:
        url = new_postgres_database(request.getfixturevalue("postgres_url"), tmp_path)
    connect(url).kw["bind"].dispose()
    engine = sqlalchemy.create_engine(url)
    inspector = sqlalchemy.inspect(engine)
    for table in ALL.sorted_tables:
        have = {c["name"]: c for c in inspector.get_columns(table.name)}
        assert set(have) == {c.name for c in table.columns}, table.name
        for column in table.columns:  # those made with their tables are as the models say
            if column.primary_key:
                assert not have[column.name]["nullable"], (table.name, column.name)
        indexes = {i["name"] for i in inspector.get_indexes(table.name)}
        assert {i.name for i in table.indexes} <= indexes, table.name
        # what keeps the records true: one run per tick, one setting per scope, ...
        unique = {
            tuple(c.name for c in constraint.columns)
            for constraint in table.constraints
            if isinstance(constraint, sqlalchemy.UniqueConstraint)
        }
        made = {tuple(u["column_names"]) for u in inspector.get_unique_constraints(table.name)}
        assert unique <= made, table.name
        keys = {
            (tuple(c.parent.name for c in fk.elements), fk.referred_table.name)
            for fk in table.foreign_key_constraints
        }
        found = {
            (tuple(fk["constrained_columns"]), fk["referred_table"])
            for fk in inspector.get_foreign_keys(table.name)
        }
        assert keys == found, table.name
    engine.dispose()


def test_a_database_at_a_revision_this_nbjobs_lacks_is_used_and_said_so(tmp_path, caplog):
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    connect(url).kw["bind"].dispose()
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("UPDATE alembic_version SET version_num = '0099'"))
    engine.dispose()
    with caplog.at_level(logging.INFO, "nbjobs.job_service"):
        sessions = connect(url)
    with sessions() as session:
        assert session.scalar(sqlalchemy.text("SELECT count(*) FROM nbjobs_jobs")) == 0
    sessions.kw["bind"].dispose()
    [said] = [r.getMessage() for r in caplog.records if "newer nbjobs" in r.getMessage()]
    assert f"(revision 0099, which this one does not have; this one knows {SCHEMA_VERSION})" in (
        said
    )
