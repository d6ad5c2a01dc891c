"""The usage a caller may see: jobs and GPU-hours per user and group this period, and
GPU-hours per day over a range, broken down by user, group, class, flavor or node.

Admins see every job, teachers their students' and their own, everyone else their
own. The days come from :mod:`.usage` (summed per day), the period's rows from the
jobs themselves; GPU-hours are :func:`.quotas.gpu_hours_held`, as the quotas count them.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import select

from nbjobs.config import PERIODS
from nbjobs.models import ClassInfo, JobState, Usage, UsageRow

from . import metering, usage
from .db import ACTIVE_VALUES, JobRecord, utcnow
from .errors import Caller, DamagedRecord, Invalid
from .quotas import gpu_hours_held

if TYPE_CHECKING:
    from .context import Context
    from .listing import Listing
    from .quotas import Quotas


class UsageReports:
    """A caller's usage report."""

    def __init__(self, ctx: Context, *, listing: Listing, quotas: Quotas) -> None:
        self.ctx = ctx
        self.listing = listing
        self.quotas = quotas

    def report(
        self,
        caller: Caller,
        *,
        since: str | None = None,
        until: str | None = None,
        by: str = "user",
    ) -> Usage:
        """Jobs and GPU-hours per user and group this period, and GPU-hours allocated
        and busy per day over the days ``since`` to ``until`` broken down ``by`` user,
        group, class, flavor or node (see :mod:`.metering`). Admins see every job,
        teachers their students' and their own, everyone else their own."""
        period = self.ctx.config.quotas.default.period
        now = utcnow()
        visible: set[str] | None = None
        if not caller.admin:
            # a teacher also sees their students
            students = {s for c in self.ctx.classes.taught_by(caller.name) for s in c.students}
            visible = {caller.name, *students}
        classes = self.ctx.classes.all() if caller.admin else self._classes_seen_by(caller)
        period_since = now - PERIODS[period]
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
            query = select(JobRecord).where(
                (JobRecord.finished_at.is_(None)) | (JobRecord.finished_at >= period_since)
            )
            if visible is not None:
                query = query.where(JobRecord.user.in_(visible))
            records = self.listing.readable_records(db, query, "the usage")
        users: dict[str, UsageRow] = {}
        groups: dict[str, UsageRow] = {}
        for r in records:
            problem = _usage_problem(r)
            if problem is not None:
                self.ctx.log.warning(
                    "%s; left out of the usage", DamagedRecord(r.id, problem).message
                )
                continue
            held = gpu_hours_held(r.started_at, r.finished_at, r.charged_gpus, period_since, now)
            hours = held if r.gpu_count else 0.0
            for name, table in [(r.user, users)] + [(g, groups) for g in r.groups]:
                row = table.setdefault(
                    name, UsageRow(name=name, jobs=0, running=0, queued=0, gpu_hours=0)
                )
                row.jobs += 1
                row.running += r.state in ACTIVE_VALUES
                row.queued += r.state == JobState.QUEUED.value
                row.gpu_hours = round(row.gpu_hours + hours, 4)
        user_groups = {r.user: frozenset(r.groups or []) for r in records}
        for row in users.values():
            quota = self.quotas.of(Caller(row.name, user_groups.get(row.name, frozenset())))
            if quota.gpu_hours is not None and quota.period == period:
                row.gpu_hours_limit = quota.gpu_hours
        order = lambda rows: sorted(rows.values(), key=lambda u: (-u.gpu_hours, u.name))  # noqa: E731
        return Usage(
            since=period_since,
            period=period,
            users=order(users),
            groups=order(groups),
            **report,
        )

    def _classes_seen_by(self, caller: Caller) -> list[ClassInfo]:
        """The classes whose usage a caller may see: those they teach or are in."""
        seen = {c.name: c for c in self.ctx.classes.taught_by(caller.name)}
        for c in self.ctx.classes.of_student(caller.name):
            seen.setdefault(c.name, c)
        return list(seen.values())


def _usage_problem(record: JobRecord) -> str | None:
    """Why a record cannot count in the usage (None: it can)."""
    if record.state not in {s.value for s in JobState}:
        return f"state {record.state!r} is not a job state"
    if not isinstance(record.user, str):
        return "it has no user"
    if not isinstance(record.groups, list) or not all(isinstance(g, str) for g in record.groups):
        return f"groups {record.groups!r} is not a list of names"
    if record.gpu_count is not None and not isinstance(record.gpu_count, int):
        return f"gpu_count {record.gpu_count!r} is not a number"
    for name in ("started_at", "finished_at"):
        value = getattr(record, name)
        if value is not None and not isinstance(value, datetime):
            return f"{name} {value!r} is not a time"
    return None
