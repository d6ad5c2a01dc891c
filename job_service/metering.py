"""Metering: GPU-hours allocated and GPU-hours busy, per day, broken down by user, group,
class, flavor or node, over any range of dates.

*Allocated* is what a job held: its GPUs (in GPU-equivalents: a flavor's ``fraction``
of a GPU counts as that much) times the time from its start to its end (or to now,
while it runs), as the cluster recorded them. *Busy* is what its GPUs did: the runner's
telemetry (``gpu_busy_seconds``: for each GPU, the seconds sampled times the
utilisation; for a share of a GPU, that share of it) spread evenly over the job's run.
A job counts in the days its run overlaps, in UTC, each with the part of its run that
fell in that day; a job that ran from 23:00 to 01:00 gives an hour to each day.

**The one rule** for every figure of a period, here and nowhere else: a job counts in a
period when its run (from its start to its end, or to now while it runs) overlaps the
period, with the GPU-hours of the part of its run inside it. A job that never started
(queued, cancelled before it started) counts in no period. The usage report's range
(whole UTC days), its rows per user against budgets and the budgets themselves (the
rolling window of :data:`~nbjobs.config.PERIODS`, :func:`gpu_hours_in`) all count so.

A job counts once per key it has: in each of its groups (``by="group"``), in each class
its owner is a student of (``by="class"``). Jobs whose GPUs were never sampled (telemetry
off, a job that ended before the first sample) count as allocated and not busy.

The work is one query of plain columns over the jobs the range overlaps and one pass
in Python, the database working out the times as seconds; a week's report from a
database of 100 000 jobs takes a few tens of milliseconds (bench/metering_bench.py).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, NamedTuple

from sqlalchemy import Float, Text, cast, func, select, text, type_coerce
from sqlalchemy.orm import Session

from nbjobs.models import UsageDay, UsageLine

from .db import BUSY_SHARE, CHARGED_GPUS, NOT_ROLLED, JobRecord, KeptUsage, RetiredUsage

#: what a report may be broken down by
BREAKDOWNS = ("user", "group", "class", "flavor", "node")

#: the key of jobs whose node nobody recorded (a local job, one that never started)
NO_NODE = "(none)"

_DAY = timedelta(days=1)
log = logging.getLogger("nbjobs.job_service")
#: the Julian day of 1970-01-01 00:00 UTC
_UNIX_JULIAN_DAY = 2440587.5
_EPOCH_DATE = date(1970, 1, 1)


class MeteredJob(NamedTuple):
    """What metering reads of one job (times in seconds since the epoch, UTC). A named
    tuple: a report makes one per job, and a frozen dataclass took most of the time of a
    report over 100 000 jobs to build."""

    user: str
    groups: tuple[str, ...]
    flavor: str
    node: str | None
    #: the GPUs it counts as (a 0.25 slice: 0.25)
    gpus: float
    started: float
    #: None while it runs (counted to ``now``)
    finished: float | None
    #: GPU-seconds busy over its whole run, from its telemetry; None if never sampled
    gpu_busy_seconds: float | None


@dataclass(slots=True)
class Totals:
    """GPU-seconds allocated and busy (kept in seconds; reports show hours)."""

    allocated: float = 0.0
    busy: float = 0.0


@dataclass
class Line:
    """One key of a report (a user, a group…): its jobs, its totals and each day's."""

    name: str
    jobs: int = 0
    total: Totals = field(default_factory=Totals)
    days: dict[date, Totals] = field(default_factory=dict)
    #: cost, from each flavor's ``cost_per_gpu_hour`` (None: no flavor of its jobs has one)
    cost: float | None = None


def job_columns(db: Session) -> tuple[Any, ...]:
    """What metering reads of a job record, as :class:`MeteredJob`'s fields (the times as
    seconds since the epoch, worked out by the database: parsing a hundred thousand
    datetimes in Python was most of a report's time)."""
    return (
        JobRecord.user,
        cast(JobRecord.groups, Text),
        JobRecord.flavor,
        JobRecord.node,
        CHARGED_GPUS,
        _epoch_seconds(db, JobRecord.started_at),
        _epoch_seconds(db, JobRecord.finished_at),
        JobRecord.gpu_busy_seconds * BUSY_SHARE,
    )


def kept_columns(db: Session) -> tuple[Any, ...]:
    """The same of a deleted job's kept GPU time."""
    return (
        KeptUsage.user,
        cast(KeptUsage.groups, Text),
        KeptUsage.flavor,
        KeptUsage.node,
        KeptUsage.gpus,
        _epoch_seconds(db, KeptUsage.started_at),
        _epoch_seconds(db, KeptUsage.finished_at),
        KeptUsage.busy_seconds,
    )


def jobs_in_range(
    db: Session,
    since: datetime,
    until: datetime,
    users: Iterable[str] | None = None,
    *,
    unsummed: bool = False,
    gpus_only: bool = False,
) -> list[MeteredJob]:
    """The started jobs whose run overlaps ``[since, until)`` (of ``users``, or all; with
    ``unsummed``, those not in the daily sums yet: see :mod:`.usage`; with ``gpus_only``,
    those that held a GPU, all a GPU-hour figure needs: a CPU job adds none to it)."""
    query = select(*job_columns(db)).where(
        JobRecord.started_at.is_not(None),
        JobRecord.started_at < until,
        (JobRecord.finished_at.is_(None)) | (JobRecord.finished_at > since),
    )
    # deleted jobs' GPU time counts in its period as it did before
    kept = select(*kept_columns(db)).where(
        KeptUsage.started_at < until, KeptUsage.finished_at > since
    )
    if users is not None:
        query = query.where(JobRecord.user.in_(list(users)))
        kept = kept.where(KeptUsage.user.in_(list(users)))
    if gpus_only:
        query = query.where(CHARGED_GPUS > 0)
        kept = kept.where(KeptUsage.gpus > 0)
    if unsummed:  # as the partial indexes say it, for the database to use them
        query = query.where(text(f"nbjobs_jobs.{NOT_ROLLED}"))
        kept = kept.where(text(f"nbjobs_usage_kept.{NOT_ROLLED}"))
    # core rows (no ORM loading): a report reads a hundred thousand of them
    rows: Sequence[Any]
    try:
        rows = db.connection().execute(query).all()
    except (ValueError, TypeError):  # a damaged row (a time that is no time): skip it
        rows = _readable_rows(db, query)
    return metered([*rows, *db.connection().execute(kept).all()])


def metered(rows: Iterable[Sequence[Any]]) -> list[MeteredJob]:
    """Rows of :func:`job_columns` (or :func:`kept_columns`) as jobs, less the damaged."""
    groups_of: dict[str | None, tuple[str, ...]] = {}
    jobs = []
    for row in rows:
        user, groups, flavor, node, gpus, started, finished, busy = row
        if started is None:  # a start the database cannot read as a time
            log.warning("a job of %s with a damaged start time left out of the usage", user)
            continue
        if groups not in groups_of:  # the same few group lists, decoded once each
            groups_of[groups] = stored_groups(groups)
        try:
            jobs.append(
                MeteredJob(
                    user,
                    groups_of[groups],
                    flavor,
                    node,
                    float(gpus or 0),
                    float(started),
                    None if finished is None else float(finished),
                    None if busy is None else float(busy),
                )
            )
        except (ValueError, TypeError) as exc:
            log.warning("a job with damaged times or counts left out of the usage: %s", exc)
    return jobs


def _epoch_seconds(db: Session, column: Any) -> Any:
    """``column`` (a naive UTC time) as seconds since the epoch, in SQL: PostgreSQL's
    ``extract(epoch …)``, else SQLite's Julian day, to the millisecond (a text that is
    no time gives NULL)."""
    if db.get_bind().dialect.name == "postgresql":
        return cast(func.extract("epoch", column), Float)
    # SQLite keeps Julian days to the millisecond: rounded there, whole seconds stay whole
    days = func.julianday(type_coerce(column, Text)) - _UNIX_JULIAN_DAY
    return func.round(days * 86400.0, 3)


def _readable_rows(db: Session, query: Any) -> list[Any]:
    """The rows of ``query`` one at a time, less those the database cannot give back."""
    rows: list[Any] = []
    ids = db.connection().execute(query.with_only_columns(JobRecord.id)).scalars().all()
    for job_id in ids:
        try:
            rows.extend(db.connection().execute(query.where(JobRecord.id == job_id)).all())
        except (ValueError, TypeError) as exc:
            log.warning("job %s's record is damaged (%s); left out of the usage", job_id, exc)
    return rows


def meter(
    jobs: Iterable[MeteredJob],
    *,
    since: datetime,
    until: datetime,
    now: datetime,
    by: str,
    classes: Mapping[str, Iterable[str]] | None = None,
    cost_per_gpu_hour: Mapping[str, float] | None = None,
    everyone: Line | None = None,
    into: dict[str, Line] | None = None,
) -> list[Line]:
    """GPU time in ``[since, until)``, per key of ``by`` and per UTC day, most allocated
    first. ``classes`` maps a class to its students (``by="class"``);
    ``cost_per_gpu_hour`` a flavor to its price of one allocated GPU-hour. ``everyone``,
    when given, gets every job once (whatever its keys), in the same pass; ``into``, the
    lines so far (of other jobs), which the jobs add to."""
    if by not in BREAKDOWNS:
        raise ValueError(f"by must be one of {', '.join(BREAKDOWNS)}, not {by!r}")
    class_of: dict[str, list[str]] = {}
    for name, students in (classes or {}).items():
        for student in students:
            class_of.setdefault(student, []).append(name)
    prices = cost_per_gpu_hour or {}
    lines: dict[str, Line] = {} if into is None else into
    first, last, now_s = _seconds(since), _seconds(until), _seconds(now)
    for job in jobs:
        keys = _keys(job, by, class_of)
        if not keys and everyone is None:
            continue
        start, end = job.started, job.finished if job.finished is not None else now_s
        if end <= start:
            continue
        shown_start, shown_end = max(start, first), min(end, last)
        if shown_end <= shown_start:
            continue
        busy_rate = (job.gpu_busy_seconds or 0.0) / (end - start)  # GPU-seconds a second
        pieces = _days(shown_start, shown_end)
        price = prices.get(job.flavor)
        if everyone is not None:
            _add(everyone, pieces, job.gpus, busy_rate, price)
        for key in keys:
            line = lines.get(key)
            if line is None:
                line = lines[key] = Line(key)
            _add(line, pieces, job.gpus, busy_rate, price)
    return most_first(lines.values())


def gpu_hours_in(db: Session, user: str, since: datetime, now: datetime) -> float:
    """The GPU-hours ``user``'s jobs (deleted ones' too: deleting gives no hours back)
    held from ``since`` up to ``now``: what a budget counts, by :func:`meter`'s rule."""
    jobs = jobs_in_range(db, since, now, [user], gpus_only=True)
    lines = meter(jobs, since=since, until=now, now=now, by="user")
    return lines[0].total.allocated / 3600 if lines else 0.0


def most_first(lines: Iterable[Line]) -> list[Line]:
    """Lines in a report's order: the most GPU time allocated first, then by name."""
    return sorted(lines, key=lambda line: (-line.total.allocated, line.name))


def _add(
    line: Line,
    pieces: Sequence[tuple[date, float]],
    gpus: float,
    busy_rate: float,
    price: float | None,
) -> None:
    """One job's days into a line."""
    line.jobs += 1
    for day, seconds in pieces:
        totals = line.days.get(day)
        if totals is None:
            totals = line.days[day] = Totals()
        allocated, busy = seconds * gpus, seconds * busy_rate
        totals.allocated += allocated
        totals.busy += busy
        line.total.allocated += allocated
        line.total.busy += busy
        if price is not None:
            line.cost = (line.cost or 0.0) + allocated / 3600 * price


def day_range(since: date, until: date) -> tuple[datetime, datetime]:
    """The instants a report of the days ``since`` to ``until`` (both included) covers."""
    start = datetime.combine(since, time.min, tzinfo=timezone.utc)
    end = datetime.combine(until, time.min, tzinfo=timezone.utc) + _DAY
    return start, end


def _keys(job: MeteredJob, by: str, class_of: Mapping[str, Sequence[str]]) -> Sequence[str]:
    if by == "user":
        return (job.user,)
    if by == "group":
        return job.groups
    if by == "class":
        return class_of.get(job.user, ())
    if by == "flavor":
        return (job.flavor,)
    return (job.node or NO_NODE,)


def _days(start: float, end: float) -> list[tuple[date, float]]:
    """``[start, end)`` (epoch seconds) cut at UTC midnights: each day and its seconds."""
    return [(day_date(day), seconds) for day, seconds in pieces(start, end)]


def pieces(start: float, end: float) -> list[tuple[int, float]]:
    """The same, each day as its number (days since 1970-01-01)."""
    first, last = int(start // 86400), int(end // 86400)
    if last > first and last * 86400.0 == end:  # an end at midnight gives that day nothing
        last -= 1
    if first == last:  # most jobs: within one day
        return [(first, end - start)]
    cut = []
    for day in range(first, last + 1):
        piece_start, piece_end = max(start, day * 86400.0), min(end, (day + 1) * 86400.0)
        cut.append((day, piece_end - piece_start))
    return cut


@functools.lru_cache(maxsize=4096)
def day_date(day: int) -> date:
    """The UTC date of a day number (days since 1970-01-01)."""
    return _EPOCH_DATE + timedelta(days=day)


def day_number(day: date) -> int:
    """A date's day number (days since 1970-01-01)."""
    return (day - _EPOCH_DATE).days


def _seconds(when: datetime) -> float:
    """An aware datetime as seconds since the epoch."""
    return when.timestamp()


def stored_groups(stored: str | None) -> tuple[str, ...]:
    """A job's groups as stored (JSON text); none if they cannot be read."""
    try:
        value: Any = json.loads(stored) if stored else []
    except ValueError:
        return ()
    if not isinstance(value, list):
        return ()
    return tuple(g for g in value if isinstance(g, str))


class BadRange(ValueError):
    """A report asked for with dates or a breakdown that make no sense; says which."""


#: the longest range one report may cover, in days
MAX_DAYS = 400


def parse_range(
    since: str | None, until: str | None, *, today: date, default_days: int
) -> tuple[date, date]:
    """A report's days from the API's ``since``/``until`` (``YYYY-MM-DD``, both included;
    by default the ``default_days`` up to today). Raises BadRange with a sentence."""
    try:
        last = date.fromisoformat(until) if until else today
    except ValueError:
        raise BadRange(f"until must be a date like 2026-11-16, not {until!r}") from None
    try:
        first = date.fromisoformat(since) if since else last - timedelta(days=default_days - 1)
    except ValueError:
        raise BadRange(f"since must be a date like 2026-11-16, not {since!r}") from None
    if first > last:
        raise BadRange(f"since ({first}) is after until ({last})")
    if (last - first).days + 1 > MAX_DAYS:
        raise BadRange(f"a report covers {MAX_DAYS} days at most; ask for less")
    return first, last


def as_usage_lines(lines: Iterable[Line]) -> list[UsageLine]:
    """The API's view of metered lines: hours, rounded, days in order."""
    return [usage_line(line) for line in lines]


def usage_line(line: Line) -> UsageLine:
    allocated, busy = line.total.allocated / 3600, line.total.busy / 3600
    return UsageLine(
        name=line.name,
        jobs=line.jobs,
        gpu_hours_allocated=round(allocated, 4),
        gpu_hours_busy=round(busy, 4),
        busy_percent=round(100 * busy / allocated, 1) if allocated > 0 else None,
        cost=None if line.cost is None else round(line.cost, 2),
        days=[
            UsageDay(
                date=day,
                gpu_hours_allocated=round(totals.allocated / 3600, 4),
                gpu_hours_busy=round(totals.busy / 3600, 4),
            )
            for day, totals in sorted(line.days.items())
        ],
    )


def retire(db: Session, record: JobRecord) -> None:
    """Keep the GPU time of a job whose record goes (``forget``), in ``db``'s transaction:
    dated (:class:`KeptUsage`), so that budgets and usage reports go on counting it in its
    period, and in the retired totals, so that the counters Prometheus reads never go down."""
    share = record.charged_gpus / record.gpu_count if record.gpu_count else 1.0
    if (
        record.started_at is not None
        and record.charged_gpus
        and db.get(KeptUsage, record.id) is None
    ):
        kept = KeptUsage(
            job_id=record.id,
            user=record.user,
            groups=list(record.groups or []),
            flavor=record.flavor,
            node=record.node,
            gpus=float(record.charged_gpus),
            started_at=record.started_at,
            finished_at=record.finished_at or record.started_at,
            busy_seconds=None
            if record.gpu_busy_seconds is None
            else record.gpu_busy_seconds * share,
        )
        db.add(kept)
        # In the daily sums already, or to be summed as itself: read once this
        # transaction writes (SQLite: no round can commit from here to its end), and
        # under the row's lock (PostgreSQL: a round summing the job is waited for).
        db.flush()
        kept.usage_rolled = bool(
            db.scalar(
                select(JobRecord.usage_rolled).where(JobRecord.id == record.id).with_for_update()
            )
        )
    held, busy = record.gpu_seconds_held or 0.0, (record.gpu_busy_seconds or 0.0) * share
    if not held and not busy:
        return
    key = (record.user, record.flavor, record.node or "")
    row = db.get(RetiredUsage, key)
    if row is None:
        db.add(
            RetiredUsage(
                user=key[0], flavor=key[1], node=key[2], held_seconds=held, busy_seconds=busy
            )
        )
    else:
        row.held_seconds += held
        row.busy_seconds += busy
