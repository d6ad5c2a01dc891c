"""The usage a caller may see: jobs and GPU-hours per user and group in their budget's
window (the rolling period of :data:`~nbjobs.config.PERIODS`: "the last 7 days"), the
caller's own against their budget, and GPU-hours per day over a range of whole UTC days,
broken down by user, group, class, flavor or node.

Admins see every job, teachers their students' and their own, everyone else their
own. Every figure counts a job by the one rule of :mod:`.metering` (its run overlaps the
period; the GPU-hours of the part inside it), the budgets' check (:mod:`.quotas`) too:
the rows here are what a submit is held to. The range's days come from :mod:`.usage`
(summed per day).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Text, cast, select
from sqlalchemy.orm import Session

from nbjobs.config import PERIODS
from nbjobs.models import ClassInfo, JobState, Usage, UsageRow

from . import metering, usage
from .db import ACTIVE_VALUES, JobRecord, utcnow
from .errors import Caller, Invalid

if TYPE_CHECKING:
    from .context import Context
    from .quotas import Quotas

#: the states counted as running and as queued now, beside a window's figures
_NOW_STATES = (*ACTIVE_VALUES, JobState.QUEUED.value)


class UsageReports:
    """A caller's usage report."""

    def __init__(self, ctx: Context, *, quotas: Quotas) -> None:
        self.ctx = ctx
        self.quotas = quotas

    def report(
        self,
        caller: Caller,
        *,
        since: str | None = None,
        until: str | None = None,
        by: str = "user",
    ) -> Usage:
        """Jobs and GPU-hours per user (each in their budget's period) and group (in
        the default quota's), the caller's own, and GPU-hours allocated and busy per day
        over the whole UTC days ``since`` to ``until`` broken down ``by`` user, group,
        class, flavor or node (see :mod:`.metering`). Admins see every job, teachers
        their students' and their own, everyone else their own."""
        period = self.ctx.config.quotas.default.period
        now = utcnow()
        visible: set[str] | None = None
        if not caller.admin:
            # a teacher also sees their students
            students = {s for c in self.ctx.classes.taught_by(caller.name) for s in c.students}
            visible = {caller.name, *students}
        classes = self.ctx.classes.all() if caller.admin else self._classes_seen_by(caller)
        with self.ctx.sessions() as db:
            try:
                report = usage.report(
                    db,
                    config=self.ctx.config,
                    classes=classes,
                    users=visible,
                    since=since,
                    until=until,
                    by=by,
                    now=now,
                    default_days=PERIODS[period].days,
                )
            except metering.BadRange as exc:
                raise Invalid(str(exc)) from None
            windows = _Windows(db, now, self._periods(), visible)
            active = _active(db, visible)
        users, groups = self._rows(windows, active, period)
        # the caller's hub groups, not those their jobs recorded, decide their budget
        own = self._row(caller, windows, active.get(caller.name))
        if caller.name in users:
            users[caller.name] = own
        order = lambda rows: sorted(rows, key=lambda u: (-u.gpu_hours, u.name))  # noqa: E731
        return Usage(
            since=now - PERIODS[period],
            period=period,
            users=order(users.values()),
            groups=order(groups.values()),
            own=own,
            **report,
        )

    def _rows(
        self, windows: _Windows, active: dict[str, _Now], period: str
    ) -> tuple[dict[str, UsageRow], dict[str, UsageRow]]:
        """Each user's row (in their budget's period) and each group's (in ``period``):
        those with a job in the window or one running or queued now."""
        users: dict[str, UsageRow] = {}
        for name in sorted(windows.users() | set(active)):
            row = self._row(Caller(name, windows.groups_of(name)), windows, active.get(name))
            if row.jobs or row.running or row.queued:
                users[name] = row
        of_groups = windows.lines(period, "group")
        group_now: dict[str, _Now] = {}
        for now in active.values():
            for group in now.groups:
                group_now.setdefault(group, _Now()).add(now)
        groups = {}
        for name in sorted(set(of_groups) | set(group_now)):
            line, now = of_groups.get(name), group_now.get(name, _Now())
            groups[name] = UsageRow(
                name=name,
                period=period,
                jobs=line.jobs if line else 0,
                running=now.running,
                queued=now.queued,
                gpu_hours=_hours(line),
            )
        return users, groups

    def _row(self, who: Caller, windows: _Windows, now: _Now | None) -> UsageRow:
        """``who``'s jobs and GPU-hours in their budget's period (the default quota's when
        they have no budget), against that budget and what a teacher granted of it."""
        quota = self.quotas.of(who)
        budget = quota.gpu_hours
        period = quota.period if budget is not None else self.ctx.config.quotas.default.period
        line = windows.lines(period, "user").get(who.name)
        return UsageRow(
            name=who.name,
            period=period,
            jobs=line.jobs if line else 0,
            running=now.running if now else 0,
            queued=now.queued if now else 0,
            gpu_hours=_hours(line),
            gpu_hours_limit=budget,
            gpu_hours_granted=self.quotas.granted(who) if budget is not None else 0.0,
        )

    def _periods(self) -> set[str]:
        """Every period a budget may count over here (the longest is read once)."""
        quotas = self.ctx.config.quotas
        periods: set[str] = {quotas.default.period}
        periods |= {q.period for q in (*quotas.groups.values(), *quotas.users.values())}
        periods |= {c.period for c in self.ctx.classes.all()}
        return periods

    def _classes_seen_by(self, caller: Caller) -> list[ClassInfo]:
        """The classes whose usage a caller may see: those they teach or are in."""
        seen = {c.name: c for c in self.ctx.classes.taught_by(caller.name)}
        for c in self.ctx.classes.of_student(caller.name):
            seen.setdefault(c.name, c)
        return list(seen.values())


class _Windows:
    """The jobs of the longest budget period up to now, metered per period on demand."""

    def __init__(
        self, db: Session, now: datetime, periods: Iterable[str], users: Collection[str] | None
    ) -> None:
        self.now = now
        longest = max(PERIODS[p] for p in periods)
        self.jobs = metering.jobs_in_range(db, now - longest, now, users)
        self._lines: dict[tuple[str, str], dict[str, metering.Line]] = {}
        # each user's groups as their latest job read records them
        self._groups = {job.user: job.groups for job in self.jobs}

    def lines(self, period: str, by: str) -> dict[str, metering.Line]:
        key = (period, by)
        if key not in self._lines:
            since = self.now - PERIODS[period]
            lines = metering.meter(self.jobs, since=since, until=self.now, now=self.now, by=by)
            self._lines[key] = {line.name: line for line in lines}
        return self._lines[key]

    def users(self) -> set[str]:
        return set(self._groups)

    def groups_of(self, user: str) -> frozenset[str]:
        """The groups ``user``'s jobs recorded (what their quota is worked out by)."""
        return frozenset(self._groups.get(user, ()))


class _Now:
    """A user's or group's jobs running and queued now."""

    def __init__(self, groups: tuple[str, ...] = ()) -> None:
        self.groups = groups
        self.running = 0
        self.queued = 0

    def add(self, other: _Now) -> None:
        self.running += other.running
        self.queued += other.queued


def _active(db: Session, users: Collection[str] | None) -> dict[str, _Now]:
    """Each user's jobs running and queued now (and their groups)."""
    query = select(JobRecord.user, cast(JobRecord.groups, Text), JobRecord.state).where(
        JobRecord.state.in_(_NOW_STATES)
    )
    if users is not None:
        query = query.where(JobRecord.user.in_(list(users)))
    active: dict[str, _Now] = {}
    for user, groups, state in db.connection().execute(query).all():
        if not isinstance(user, str):
            continue
        now = active.setdefault(user, _Now(metering.stored_groups(groups)))
        now.running += state in ACTIVE_VALUES
        now.queued += state == JobState.QUEUED.value
    return active


def _hours(line: metering.Line | None) -> float:
    return round(line.total.allocated / 3600, 4) if line else 0.0
