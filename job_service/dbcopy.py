"""``nbjobs copy-database``: move the job records to another database.

A hub that started on one machine with SQLite and grows onto a cluster wants its
history to come along: the jobs users see in their panels, the GPU-hours budgets and
usage reports count, job definitions and their runs, notification settings. This
copies every nbjobs table from one database to another (typically SQLite to
PostgreSQL) through SQLAlchemy, so values travel as the service reads and writes
them, whatever the two databases store underneath.

What it guards against:

- a job service using either database while it copies: it takes the dispatcher
  lease on both (a service that starts meanwhile waits as a standby, one that holds
  a lease already makes this refuse, naming it);
- a target that holds records already: refused, nothing written, so two histories
  never mix;
- a damaged row in the source (one a hand edit or a half-restored backup left):
  left out and named, the rest copied;
- half a copy: the target is written in one transaction, checked row count by row
  count before it commits.

The source is brought up to this version's schema first, as a service start would.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Table, func, select, text, tuple_
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from ..config import ConfigError, command_config_path, load_config
from .db import DatabaseUnusable, LeaseRecord, SchemaVersion, connect, engine_of, utcnow
from .lease import DispatcherLease
from .tables import ALL  # every table the service keeps

#: tables that belong to one database, not to the records: who dispatches, which schema
NOT_COPIED = {LeaseRecord.__tablename__, SchemaVersion.__tablename__}

#: rows read from the source at a time
BATCH = 500
#: a line on how far a big table has got, every so many rows
PROGRESS_EVERY = 50 * BATCH

#: exit codes
USAGE, IN_USE, NOT_EMPTY = 2, 3, 4


class CopyRefused(RuntimeError):
    """The copy cannot go on; the text says why and what to do, ``code`` is the exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Copied:
    """What one table's copy did."""

    table: str
    rows: int = 0
    #: primary keys of the rows left out, and why
    left_out: list[tuple[str, str]] = field(default_factory=list)


def shown(url: str) -> str:
    """The URL as it may be printed: without its password."""
    return make_url(url).render_as_string(hide_password=True)


def records_tables() -> list[Table]:
    """The tables that hold records, parents before children."""
    return [t for t in ALL.sorted_tables if t.name not in NOT_COPIED]


def open_source(url: str) -> sessionmaker[Session]:
    """The source database, which must exist (an SQLite path that is not there would
    otherwise be created empty, and copying nothing would look like success)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            raise CopyRefused(f"the source {url} is not an SQLite file", USAGE)
        if not Path(database).is_file():
            raise CopyRefused(
                f"there is no job database at {database}; give the file the service uses "
                "(database.url in nbjobs.yaml, relative to that file's folder)",
                USAGE,
            )
    return connect(url)


def take_lease(
    sessions: sessionmaker[Session], which: str, url: str, say: Callable[[str], None]
) -> DispatcherLease:
    """Hold ``url``'s dispatcher lease, so that no job service dispatches from it meanwhile.

    A claim that is not renewed is let run out (a service that died, or a backup copied
    while its service ran: the row came along); one that is renewed is a running service.
    """
    lease = DispatcherLease(sessions, seconds=120)
    lease.holder = f"nbjobs copy-database ({lease.holder})"
    seen: tuple[str, datetime] | None = None
    while (holder := lease.try_take()) is not None:
        with sessions() as db:
            row = db.get(LeaseRecord, lease.name)
            claim = (row.holder, row.expires_at) if row is not None else None
        if claim is None:
            continue
        if seen is None:
            seen = claim
            left = max(0.0, (claim[1] - utcnow()).total_seconds())
            say(
                f"the {which} database's lease is held by {holder} for {left:.0f} s more; "
                "waiting to see whether it renews it"
            )
        elif claim != seen:
            raise CopyRefused(
                f"a job service ({holder}) is using the {which} database {shown(url)}; "
                "stop it first",
                IN_USE,
            )
        time.sleep(0.25)
    return lease


def check_empty(conn: Connection, url: str) -> None:
    held = []
    for table in records_tables():
        count = conn.scalar(select(func.count()).select_from(table)) or 0
        if count:
            held.append(f"{table.name}: {count}")
    if held:
        raise CopyRefused(
            f"the target database {shown(url)} already holds job records ({'; '.join(held)}); "
            "copy into a new, empty database (nothing was written)",
            NOT_EMPTY,
        )


def _keys(conn: Connection, table: Table) -> list[tuple[Any, ...]]:
    """Every row's primary key (keys are plain strings and numbers: they always read)."""
    columns = list(table.primary_key.columns)
    return [tuple(row) for row in conn.execute(select(*columns).order_by(*columns))]


def _read(conn: Connection, table: Table, keys: list[tuple[Any, ...]]) -> Iterator[Any]:
    columns = list(table.primary_key.columns)
    where = (
        columns[0].in_([k[0] for k in keys]) if len(columns) == 1 else tuple_(*columns).in_(keys)
    )
    yield from conn.execute(select(table).where(where)).mappings()


def copy_table(
    source: Connection,
    target: Connection,
    table: Table,
    lease: DispatcherLease,
    say: Callable[[str], None] = print,
) -> Copied:
    done = Copied(table.name)
    keys = _keys(source, table)
    for start in range(0, len(keys), BATCH):
        if start and start % PROGRESS_EVERY == 0:  # a big table: how far it has got
            say(f"  {table.name}: {start} of {len(keys)} rows ...")
        batch = keys[start : start + BATCH]
        try:
            rows = [dict(row) for row in _read(source, table, batch)]
        except (TypeError, ValueError):
            # a damaged value in this batch: the rows one by one, leaving out what fails
            rows = []
            for key in batch:
                try:
                    rows.extend(dict(row) for row in _read(source, table, [key]))
                except (TypeError, ValueError) as exc:
                    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    done.left_out.append((":".join(map(str, key)), reason))
        if rows:
            target.execute(table.insert(), rows)
            done.rows += len(rows)
        lease.renew()
    return done


def _restart_sequences(target: Connection, table: Table) -> None:
    """PostgreSQL numbers new rows from a sequence, which copied rows did not advance."""
    for column in table.primary_key.columns:
        if column.autoincrement is True or (
            column.autoincrement == "auto" and column.type.python_type is int
        ):
            target.execute(
                text(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', '{column.name}'), "
                    f'COALESCE(MAX("{column.name}"), 1), MAX("{column.name}") IS NOT NULL) '
                    f"FROM {table.name}"
                )
            )


def copy_database(
    source_url: str, target_url: str, say: Callable[[str], None] = print
) -> list[Copied]:
    """Copy every record from ``source_url`` into the empty ``target_url``."""
    if make_url(source_url) == make_url(target_url):
        raise CopyRefused("the source and the target are the same database", USAGE)
    source = open_source(source_url)
    target: sessionmaker[Session] | None = None
    leases: list[DispatcherLease] = []
    try:
        leases.append(take_lease(source, "source", source_url, say))
        target = connect(target_url)
        leases.append(take_lease(target, "target", target_url, say))
        return _copy(engine_of(source), engine_of(target), target_url, leases[0], say)
    finally:
        for lease in leases:
            with contextlib.suppress(SQLAlchemyError):
                lease.release()
        for sessions in (source, target):
            if sessions is not None:
                engine_of(sessions).dispose()


def _copy(
    source: Engine,
    target: Engine,
    target_url: str,
    lease: DispatcherLease,
    say: Callable[[str], None],
) -> list[Copied]:
    report = []
    with source.connect() as src, target.begin() as dst:
        check_empty(dst, target_url)
        for table in records_tables():
            done = copy_table(src, dst, table, lease, say)
            say(f"  {table.name}: {done.rows} row{'s' if done.rows != 1 else ''}")
            for key, reason in done.left_out:
                say(f"    left out {key}: a damaged value ({reason})")
            report.append(done)
            if target.dialect.name == "postgresql":
                _restart_sequences(dst, table)
        # the same number of rows on each side, or nothing is committed
        for done in report:
            table = ALL.tables[done.table]
            there = dst.scalar(select(func.count()).select_from(table))
            if there != done.rows:
                raise CopyRefused(
                    f"{done.table}: {done.rows} rows were copied but the target holds "
                    f"{there}; nothing was committed",
                    USAGE,
                )
    return report


def copy_parser() -> argparse.ArgumentParser:
    """The argument parser of ``nbjobs copy-database``."""
    parser = argparse.ArgumentParser(
        prog="nbjobs copy-database",
        description="Copy the job records (jobs, usage, budgets, definitions, notification "
        "settings) into a new, empty database, e.g. from SQLite to PostgreSQL. Stop the job "
        "service first; then point database.url in nbjobs.yaml at the target and start it. "
        "Exit codes: 0 copied, 2 a database cannot be used, 3 a job service is using one, "
        "4 the target holds records already.",
    )
    parser.add_argument(
        "--config",
        help="the nbjobs.yaml whose database.url is the source (default: $NBJOBS_CONFIG, "
        "else nbjobs.yaml in this folder)",
    )
    parser.add_argument(
        "--from",
        dest="source",
        metavar="URL",
        help="the source database's SQLAlchemy URL, instead of the one in nbjobs.yaml",
    )
    parser.add_argument(
        "--to",
        dest="target",
        metavar="URL",
        required=True,
        help="the new, empty database's SQLAlchemy URL, e.g. "
        "postgresql+psycopg2://nbjobs:PASSWORD@db.example.org/nbjobs",
    )
    return parser


def _source_url(args: argparse.Namespace) -> str:
    if args.source:
        return str(args.source)
    return load_config(command_config_path(args.config)).database.url


def main(argv: Sequence[str] | None = None) -> int:
    args = copy_parser().parse_args(list(argv) if argv is not None else None)
    try:
        source_url = _source_url(args)
        make_url(args.target)
        say = lambda line: print(line, flush=True)  # noqa: E731
        say(f"copying {shown(source_url)} -> {shown(args.target)}")
        report = copy_database(source_url, args.target, say)
    except CopyRefused as exc:
        print(f"nbjobs copy-database: {exc}", file=sys.stderr)
        return exc.code
    except (ConfigError, DatabaseUnusable) as exc:
        print(f"nbjobs copy-database: {exc}", file=sys.stderr)
        return USAGE
    except ArgumentError:
        print(
            f"nbjobs copy-database: {args.target!r} is not a database URL; give one like "
            "postgresql+psycopg2://USER:PASSWORD@HOST/DATABASE or sqlite:////ABSOLUTE/PATH",
            file=sys.stderr,
        )
        return USAGE
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        print(
            f"nbjobs copy-database: the copy failed ({reason}); nothing was committed",
            file=sys.stderr,
        )
        return USAGE
    rows = sum(done.rows for done in report)
    left = sum(len(done.left_out) for done in report)
    jobs = next((d.rows for d in report if d.table == "nbjobs_jobs"), 0)
    print(
        f"copied {rows} rows ({jobs} jobs)"
        + (f"; left out {left} damaged row{'s' if left != 1 else ''}, named above" if left else "")
        + f". Now set database.url in nbjobs.yaml to {shown(args.target)} and start the "
        "job service."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
