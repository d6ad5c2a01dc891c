"""GPU time summed per day and key: what a usage report over months reads instead of
every job it covers.

Each ended job's GPU time is added once to one row per UTC day its run touched and per
key it has (its user, each of its groups, its flavor, its node, and ``total``): the
GPU-seconds allocated and busy that fell in that day (cut at midnight as
:func:`.metering.meter` cuts them), its cost at the price its flavor had when it was
summed, how many jobs began that day and how many ran in it. The service that holds the
dispatcher lease sums jobs as they end (:class:`UsageRoller`) and marks each one
(``usage_rolled``, in the same transaction); a report adds its days' rows to the jobs not
summed yet (running ones, those that ended since the last round), read one by one as
before, in one snapshot of the database. Whether a job is summed or not, the report reads
the same (tests/job_service/test_usage_days.py).

A report of 90 days from a database of 100 000 jobs reads a row per key and day instead
of 100 000 jobs (bench/metering_bench.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Float, Integer, String, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Mapped, Session, mapped_column

from nbjobs.config import NbjobsConfig
from nbjobs.models import FINAL_STATES, ClassInfo

from .db import NOT_ROLLED, Base, JobRecord, KeptUsage, rowcount
from .metering import (
    BREAKDOWNS,
    NO_NODE,
    BadRange,
    Line,
    MeteredJob,
    Totals,
    as_usage_lines,
    day_date,
    day_number,
    day_range,
    job_columns,
    jobs_in_range,
    kept_columns,
    meter,
    metered,
    most_first,
    parse_range,
    pieces,
    usage_line,
)
from .periodic import InRounds, Periodic, until_short

if TYPE_CHECKING:
    from .context import Context

#: the breakdowns summed; a class is the sum of its students' ``user`` rows
SUMMED = ("user", "group", "flavor", "node", "total")
#: the key of the ``total`` rows
TOTAL = ""
#: the jobs summed in one transaction
PER_ROUND = 2000
#: seconds between rounds (a report counts a job not summed yet by itself meanwhile)
ROUND = 30.0

_FINAL_VALUES = [state.value for state in FINAL_STATES]


class UsageDayRow(Base):
    """One key's GPU time in one UTC day, over the jobs summed so far."""

    __tablename__ = "nbjobs_usage_days"

    #: user, group, flavor, node or total
    breakdown: Mapped[str] = mapped_column(String(8), primary_key=True)
    #: the UTC day, as days since 1970-01-01
    day: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: the user, group, flavor or node (``(none)``: no node recorded; ``""``: the total)
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    #: GPU-seconds allocated and busy
    allocated: Mapped[float] = mapped_column(Float, default=0.0)
    busy: Mapped[float] = mapped_column(Float, default=0.0)
    #: what its jobs' GPU time cost, at their flavors' prices; None: none has a price
    cost: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: jobs whose run began this day, and jobs whose run had a part in it
    began: Mapped[int] = mapped_column(Integer, default=0)
    ran: Mapped[int] = mapped_column(Integer, default=0)


class Conflict(RuntimeError):
    """Another service summed or removed some of the same jobs meanwhile."""


# -- summing -------------------------------------------------------------------------


def roll(db: Session, prices: Mapping[str, float], limit: int = PER_ROUND) -> int:
    """Sum up to ``limit`` ended jobs not summed yet (and the kept time of deleted ones)
    into their days, in ``db``'s transaction (the caller commits); how many were.

    Raises :class:`Conflict` when another service summed or deleted one of them
    meanwhile (the caller rolls back; the next round sums what is left)."""
    done = 0
    final = JobRecord.state.in_(_FINAL_VALUES)
    # an ended job without an end time is counted to now by reports: it is left to them
    ended = JobRecord.finished_at.is_not(None) | JobRecord.started_at.is_(None)
    job_ids = db.scalars(
        select(JobRecord.id).where(text(f"nbjobs_jobs.{NOT_ROLLED}"), final, ended).limit(limit)
    ).all()
    if job_ids:
        _mark(db, JobRecord.__table__, JobRecord.id, job_ids)
        # a job that never ran (cancelled while queued) is marked, with nothing to add
        # (metered() takes a start it cannot read for a damaged one, and says so)
        ran = select(*job_columns(db)).where(JobRecord.started_at.is_not(None))
        rows = _rows(db, ran, JobRecord.id, job_ids)
        _add(db, metered(rows), prices)
        done += len(job_ids)
    kept_ids = db.scalars(
        select(KeptUsage.job_id).where(text(f"nbjobs_usage_kept.{NOT_ROLLED}")).limit(limit)
    ).all()
    if kept_ids:
        _mark(db, KeptUsage.__table__, KeptUsage.job_id, kept_ids)
        rows = _rows(db, select(*kept_columns(db)), KeptUsage.job_id, kept_ids)
        _add(db, metered(rows), prices)
        done += len(kept_ids)
    return done


def _mark(db: Session, table: Any, key: Any, ids: Collection[str]) -> None:
    """Mark ``ids`` summed, or raise Conflict if any is gone or was summed meanwhile (on
    PostgreSQL the rows stay locked to this transaction until it ends)."""
    marked = rowcount(
        db,
        update(table)
        .where(key.in_(list(ids)), text(f"{table.name}.{NOT_ROLLED}"))
        .values(usage_rolled=True),
    )
    if marked != len(ids):
        raise Conflict(f"{len(ids) - marked} of {len(ids)} jobs were summed or removed meanwhile")


def _rows(db: Session, query: Any, key: Any, ids: Collection[str]) -> list[Any]:
    """The metered columns of ``ids`` (the key first), less the rows the database
    cannot give back (a damaged time): those are marked summed and never counted, as a
    report leaves them out."""
    try:
        return list(db.connection().execute(query.where(key.in_(list(ids)))).all())
    except (ValueError, TypeError):
        rows: list[Any] = []
        for one in ids:
            try:
                rows.extend(db.connection().execute(query.where(key == one)).all())
            except (ValueError, TypeError):
                continue
        return rows


def _add(db: Session, jobs: Iterable[MeteredJob], prices: Mapping[str, float]) -> None:
    """Add ``jobs``' GPU time to their days' rows."""
    sums: dict[tuple[str, int, str], list[Any]] = {}
    for job in jobs:
        if job.finished is None or job.finished <= job.started:
            continue
        days = pieces(job.started, job.finished)
        busy_rate = (job.gpu_busy_seconds or 0.0) / (job.finished - job.started)
        price = prices.get(job.flavor)
        keys = [
            ("user", job.user),
            *(("group", g) for g in job.groups),
            ("flavor", job.flavor),
            ("node", job.node or NO_NODE),
            ("total", TOTAL),
        ]
        for index, (day, seconds) in enumerate(days):
            allocated = seconds * job.gpus
            cost = None if price is None else allocated / 3600 * price
            for breakdown, name in keys:
                entry = sums.get((breakdown, day, name))
                if entry is None:
                    entry = sums[(breakdown, day, name)] = [0.0, 0.0, None, 0, 0]
                entry[0] += allocated
                entry[1] += seconds * busy_rate
                if cost is not None:
                    entry[2] = (entry[2] or 0.0) + cost
                entry[3] += index == 0
                entry[4] += 1
    if not sums:
        return
    values = [
        {
            "breakdown": breakdown,
            "day": day,
            "name": name,
            "allocated": allocated,
            "busy": busy,
            "cost": cost,
            "began": began,
            "ran": ran,
        }
        for (breakdown, day, name), (allocated, busy, cost, began, ran) in sums.items()
    ]
    dialect = db.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(UsageDayRow)
    new = statement.excluded
    table = UsageDayRow.__table__.c
    statement = statement.on_conflict_do_update(
        index_elements=["breakdown", "day", "name"],
        set_={
            "allocated": table.allocated + new.allocated,
            "busy": table.busy + new.busy,
            # a price that appears adds to none so far; none added leaves what was
            "cost": text(
                "CASE WHEN excluded.cost IS NULL THEN nbjobs_usage_days.cost "
                "ELSE coalesce(nbjobs_usage_days.cost, 0) + excluded.cost END"
            ),
            "began": table.began + new.began,
            "ran": table.ran + new.ran,
        },
    )
    db.execute(statement, values)


class UsageRoller(InRounds):
    """Sums ended jobs into their days, a round every :data:`ROUND` seconds, while this
    service holds the dispatcher lease."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._rounds = Periodic(
            self.sweep, lambda: ROUND, what="summing ended jobs' GPU time", log=lambda: ctx.log
        )

    async def sweep(self) -> int:
        """Sum every ended job not summed yet, a transaction per :data:`PER_ROUND` jobs;
        how many were (a database upgraded from before sums its whole history here)."""
        return await until_short(lambda: self.ctx.in_db(self.roll_once), PER_ROUND)

    def roll_once(self) -> int:
        prices = {
            f.name: f.cost_per_gpu_hour
            for f in self.ctx.config.flavors
            if f.cost_per_gpu_hour is not None
        }
        with self.ctx.sessions() as db:
            try:
                done = roll(db, prices)
            except Conflict as exc:
                db.rollback()
                self.ctx.log.info("usage sums: %s; the next round sums the rest", exc)
                return 0
            db.commit()
            return done


# -- reading -------------------------------------------------------------------------


def one_snapshot(db: Session) -> None:
    """Make ``db``'s reads from here on see the database as it was at one moment (call it
    before the first): the days' rows and the jobs not summed yet are read apart, and a
    round that commits between the two must not count a job twice or not at all."""
    conn = db.connection()
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    elif conn.dialect.name == "sqlite" and not conn.connection.driver_connection.in_transaction:  # type: ignore[union-attr]
        # Python's sqlite3 opens a transaction only to write: reads each see the latest
        conn.exec_driver_sql("BEGIN")


def read(
    db: Session, breakdown: str, first: date, last: date, names: Collection[str] | None = None
) -> dict[str, Line]:
    """The summed lines of ``breakdown`` over the days ``first`` to ``last`` (both
    included), of ``names`` or all: their days, totals, cost and jobs (a job that ran
    before ``first`` and into it counts once)."""
    start, end = day_number(first), day_number(last)
    query = select(
        UsageDayRow.name,
        UsageDayRow.day,
        UsageDayRow.allocated,
        UsageDayRow.busy,
        UsageDayRow.cost,
        UsageDayRow.began,
        UsageDayRow.ran,
    ).where(
        UsageDayRow.breakdown == breakdown,
        UsageDayRow.day >= start,
        UsageDayRow.day <= end,
    )
    if names is not None:
        query = query.where(UsageDayRow.name.in_(list(names)))
    lines: dict[str, Line] = {}
    for name, day, allocated, busy, cost, began, ran in _plain_rows(db, query):
        line = lines.get(name)
        if line is None:
            line = lines[name] = Line(name)
        line.days[day_date(day)] = Totals(allocated, busy)
        line.total.allocated += allocated
        line.total.busy += busy
        if cost is not None:
            line.cost = (line.cost or 0.0) + cost
        # the jobs that began in the range, and those that began before it and ran into it
        line.jobs += ran if day == start else began
    return lines


def _plain_rows(db: Session, query: Any) -> list[tuple[Any, ...]]:
    """``query``'s rows as the database driver gives them, on ``db``'s connection (in its
    transaction): for plain numbers and names SQLAlchemy's row objects took two thirds
    of the time of a 90-day report's 29 000 rows."""
    conn = db.connection()
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    args: Any = tuple(params[k] for k in compiled.positiontup) if compiled.positional else params
    cursor = conn.connection.cursor()
    try:
        cursor.execute(str(compiled), args)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def report(
    db: Session,
    *,
    config: NbjobsConfig,
    classes: Iterable[ClassInfo],
    users: Collection[str] | None,
    since: str | None,
    until: str | None,
    by: str,
    now: datetime,
    default_days: int,
) -> dict[str, Any]:
    """The usage report's breakdown (the fields of :class:`~nbjobs.models.Usage` it fills)
    over the jobs of ``users`` (all: None), from the daily sums and the jobs not summed
    yet; :class:`~.metering.BadRange` with a sentence for a bad request."""
    if by not in BREAKDOWNS:
        raise BadRange(f"by must be one of {', '.join(BREAKDOWNS)}, not {by!r}")
    first, last = parse_range(since, until, today=now.date(), default_days=default_days)
    range_since, range_until = day_range(first, last)
    prices = {
        f.name: f.cost_per_gpu_hour for f in config.flavors if f.cost_per_gpu_hour is not None
    }
    rosters = {c.name: c.students for c in classes}
    # the sums have no user in a group's, flavor's or node's rows: a report of some
    # users by those reads their jobs themselves (a few users' jobs)
    summed = users is None or by in ("user", "class")
    one_snapshot(db)
    jobs = jobs_in_range(db, range_since, range_until, users, unsummed=summed)
    lines: dict[str, Line] = {}
    everyone = Line("total")
    if summed:
        of_users = read(db, "user", first, last, users) if by in ("user", "class") else {}
        if by == "user":
            lines = of_users
        elif by == "class":
            lines = _by_class(of_users, rosters)
        else:
            lines = read(db, by, first, last)
        if users is None:
            everyone = read(db, "total", first, last).get(TOTAL, everyone)
            everyone.name = "total"
        else:
            for line in of_users.values():
                _merge(everyone, line)
    meter(
        jobs,
        since=range_since,
        until=range_until,
        now=now,
        by=by,
        classes=rosters,
        cost_per_gpu_hour=prices,
        everyone=everyone,
        into=lines,
    )
    return {
        "range_since": first,
        "range_until": last,
        "by": by,
        "breakdown": as_usage_lines(most_first(lines.values())),
        "total": usage_line(everyone),
    }


def _by_class(
    of_users: Mapping[str, Line], rosters: Mapping[str, Iterable[str]]
) -> dict[str, Line]:
    """Each class's line: the sum of its students' (a student of two classes counts in
    both, as a job of theirs does)."""
    lines: dict[str, Line] = {}
    for name, students in rosters.items():
        for student in students:
            line = of_users.get(student)
            if line is not None:
                _merge(lines.setdefault(name, Line(name)), line)
    return lines


def _merge(into: Line, line: Line) -> None:
    """Add ``line``'s jobs, days and cost to ``into``."""
    into.jobs += line.jobs
    into.total.allocated += line.total.allocated
    into.total.busy += line.total.busy
    if line.cost is not None:
        into.cost = (into.cost or 0.0) + line.cost
    for day, totals in line.days.items():
        mine = into.days.get(day)
        if mine is None:
            mine = into.days[day] = Totals()
        mine.allocated += totals.allocated
        mine.busy += totals.busy
